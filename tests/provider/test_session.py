"""Session (Agently): windows, handlers, memo persistence, export and import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import memoryd
import supervisors
from memoryd import DefaultProvider, Session
from memoryd.provider.budget import char_length
from tests.provider.test_safe_window import a, calls, label, r, s, u
from tests.provider.test_session_export import BILLION_LAUGHS

Message = dict[str, Any]


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def keep_last_four(
    full: list[Message], window: list[Message], memo: dict[str, Any], settings: dict[str, Any]
) -> tuple[None, list[Message], dict[str, Any]]:
    return None, window[-4:], {"previous_turns": len(full) - 4, "note": "app summary"}


def analysis(
    full: list[Message], window: list[Message], memo: dict[str, Any], settings: dict[str, Any]
) -> str | None:
    return "keep_last_four" if len(window) > 6 else None


def test_full_context_and_context_window(store: memoryd.StoreHandle) -> None:
    """full_context is the stored history; context_window is what the provider sends."""
    session = Session("c", DefaultProvider(store, window=2))
    session.add_chat_history([u("1"), a("2")]).add_chat_history(u("3"))
    assert [m["content"] for m in session.full_context] == ["1", "2", "3"]
    assert [m["content"] for m in session.context_window] == ["2", "3"]


def test_simple_cut_applies_max_length(store: memoryd.StoreHandle) -> None:
    """Past max_length characters, the window keeps the newest messages that fit."""
    limit = char_length(u("b" * 30)) + char_length(u("c" * 30))
    session = Session("c", store, max_length=limit)
    session.add_chat_history([u("a" * 30), u("b" * 30), u("c" * 30)])
    assert [m["content"][0] for m in session.context_window] == ["b", "c"]
    assert len(session.full_context) == 3


def test_handlers_resize_and_persist_the_memo(store: memoryd.StoreHandle) -> None:
    """Agently's keep_last_four example: the window shrinks and the memo is an event."""
    session = Session("c", store)
    session.register_analysis_handler(analysis)
    session.register_resize_handler("keep_last_four", keep_last_four)
    session.add_chat_history([u(str(i)) for i in range(5)])
    assert session.memo == {}
    session.add_chat_history([u("5"), u("6")])
    assert [m["content"] for m in session.context_window] == ["3", "4", "5", "6"]
    assert session.memo == {"previous_turns": 3, "note": "app summary"}
    memo_events = [e for e in store.events("c") if e.kind == "memo"]
    assert [e.data for e in memo_events] == [{"previous_turns": 3, "note": "app summary"}]
    assert len(store.get("c")) == 7


def test_unchanged_memo_is_not_written_again(store: memoryd.StoreHandle) -> None:
    """set_memo with the same value writes no event."""
    session = Session("c", store)
    session.set_memo({"k": 1})
    session.set_memo({"k": 1})
    assert [e.kind for e in store.events("c")] == ["memo"]


def test_memo_survives_a_store_crash(store: memoryd.StoreHandle) -> None:
    """After the store actor is killed and restarted, a new Session reads the memo."""
    session = Session("c", store)
    session.add_chat_history(u("hi"))
    session.set_memo({"user": "Alice", "turns": [1, 2]})
    supervisors.kill(store.name)
    assert Session("c", memoryd.whereis(store.name)).memo == {"user": "Alice", "turns": [1, 2]}


def test_memo_survives_stop_and_start_on_the_same_path(tmp_path: Path) -> None:
    """A durable store stopped and started again keeps the memo and the history."""
    store = memoryd.LmdbStore.start(tmp_path / "data", name="sessions")
    session = Session("c", store).register_analysis_handler(analysis)
    session.register_resize_handler("keep_last_four", keep_last_four)
    session.add_chat_history([u(str(i)) for i in range(8)])
    store.stop()
    again = Session("c", memoryd.LmdbStore.start(tmp_path / "data", name="sessions"))
    assert again.memo == {"previous_turns": 4, "note": "app summary"}
    assert len(again.full_context) == 8


def test_set_chat_history_replaces_and_keeps_the_memo(store: memoryd.StoreHandle) -> None:
    """set_chat_history replaces the messages; the memo stays."""
    session = Session("c", store)
    session.add_chat_history([u("old")])
    session.set_memo({"k": "v"})
    session.set_chat_history([u("new 1"), a("new 2")], replace=True)
    assert [m["content"] for m in session.full_context] == ["new 1", "new 2"]
    assert Session("c", store).memo == {"k": "v"}


def test_reset_chat_history_empties_history_and_memo(store: memoryd.StoreHandle) -> None:
    """reset_chat_history leaves no messages, no memo, an empty window."""
    session = Session("c", store)
    session.add_chat_history([u("1")])
    session.set_memo({"k": "v"})
    session.reset_chat_history()
    assert session.full_context == []
    assert session.context_window == []
    assert Session("c", store).memo == {}


def test_input_and_reply_keys_record_only_chosen_fields(store: memoryd.StoreHandle) -> None:
    """record_turn keeps only the dotted paths asked for."""
    session = Session("c", store, input_keys=["input.question"], reply_keys=["answer", "score"])
    prompt = {"input": {"question": "2+2?", "secret": "x"}, "info": {"task": "math"}}
    session.record_turn(prompt, {"answer": "4", "score": 0.9, "reasoning": "long"})
    user, assistant = session.full_context
    assert json.loads(user["content"]) == {"input.question": "2+2?"}
    assert json.loads(assistant["content"]) == {"answer": "4", "score": 0.9}
    plain = Session("d", store)
    plain.record_turn("hello", "hi there")
    assert [m["content"] for m in plain.full_context] == ["hello", "hi there"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_import_round_trips_everything(store: memoryd.StoreHandle, fmt: str) -> None:
    """Tool calls, unicode, the memo and the settings come back equal in another store."""
    session = Session("c", store, max_length=5000, settings={"lang": "zh"}, reply_keys=["a"])
    call = calls("x")
    call["tool_calls"][0]["function"]["arguments"] = '{"q": "\u8ba2\u5355 A-100"}'
    history = [s("be brief"), u("yes"), call, r("x"), a("no: 'quoted' \"text\"\n")]
    session.set_chat_history(history)
    session.set_memo({"note": "\u4f60\u597d", "n": 3, "nested": {"ok": True, "none": None}})
    text = session.to_json() if fmt == "json" else session.to_yaml()
    other = memoryd.EphemeralStore.start()
    load = Session.load_json if fmt == "json" else Session.load_yaml
    restored = load(text, other)
    assert restored.id == "c"
    assert restored.full_context == history
    assert restored.memo == session.memo
    assert restored.settings == session.settings
    assert restored.reply_keys == ("a",)
    assert restored.context_window == session.context_window
    assert [label(m) for m in restored.full_context][2:4] == ["c:x", "r:x"]


def test_import_refuses_what_is_not_a_session(store: memoryd.StoreHandle) -> None:
    """Garbage, foreign documents, YAML aliases and text nested too deeply raise
    ValueError; nothing is written."""
    with pytest.raises(ValueError, match="does not parse"):
        Session.load_json("{not json", store)
    with pytest.raises(ValueError, match="not an exported memoryd session"):
        Session.load_json(json.dumps({"id": "c"}), store)
    with pytest.raises(ValueError, match="does not parse"):
        Session.load_yaml("a: [unclosed", store)
    with pytest.raises(ValueError, match="not an exported memoryd session"):
        Session.load_yaml(yaml.safe_dump([1, 2]), store)
    with pytest.raises(ValueError, match="alias"):  # a billion laughs, refused unexpanded
        Session.load_yaml(BILLION_LAUGHS, store)
    with pytest.raises(ValueError, match="nests too deeply"):
        Session.load_json('{"memo": ' + "[" * 100_000 + "]" * 100_000 + "}", store)
    assert store.conversations(include_empty=True) == []


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('"memo": {"x": NaN}', "memo.x is nan"),
        ('"memo": [1, 2]', "memo must be an object, not list"),
        ('"settings": "x"', "settings must be an object, not str"),
    ],
)
def test_a_restore_with_a_bad_memo_or_settings_writes_nothing(
    store: memoryd.StoreHandle, extra: str, needle: str
) -> None:
    """The memo and settings are checked before the history is written: a bad one is a
    ValueError naming it, and the conversation is as it was (here, with ``replace=True``,
    its old history is kept), where the history used to be replaced first."""
    store.add("job", [memoryd.messages.user("kept")])
    text = (
        '{"format": "memoryd.session/1", "id": "job", '
        f'"full_context": [{{"role": "user", "content": "restored"}}], {extra}}}'
    )
    with pytest.raises(ValueError, match=needle):
        Session.load_json(text, store, replace=True)
    assert [m["content"] for m in store.get("job")] == ["kept"]
    assert store.version("job") == 1


def test_bad_handlers_and_arguments_raise(store: memoryd.StoreHandle) -> None:
    """Unknown resize names, bad handler results and bad options are named."""
    session = Session("c", store).register_analysis_handler(lambda *args: "missing")
    with pytest.raises(ValueError, match="'missing'"):
        session.add_chat_history(u("x"))
    session = Session("d", store).register_analysis_handler(lambda *args: "bad")
    session.register_resize_handler("bad", lambda *args: [])  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return"):
        session.refresh()
    with pytest.raises(TypeError):
        Session("e", object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_length"):
        Session("e", store, max_length=0)
    with pytest.raises(ValueError, match="input_keys"):
        Session("e", store, input_keys=["a..b"])
    with pytest.raises(TypeError):
        Session("e", store).set_memo(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Session("e", store).set_memo({"when": object()})
    with pytest.raises(memoryd.InvalidMessage):
        Session("e", store).add_chat_history("hello")  # type: ignore[arg-type]


def test_with_conversation_carries_the_policy_to_another_conversation(
    store: memoryd.StoreHandle,
) -> None:
    """The twin session has the settings, keys and handlers, writes nothing, and keeps
    its own history and memo; registering on one leaves the other."""
    original = Session(None, store, max_length=500, input_keys=["q"], settings={"tone": "dry"})
    original.register_analysis_handler(analysis)
    original.register_resize_handler("keep_last_four", keep_last_four)
    original.add_chat_history([u(str(i)) for i in range(7)])
    twin = original.with_conversation("other")
    assert (twin.id, twin.named, original.named) == ("other", True, False)
    assert twin.settings == original.settings == {"tone": "dry", "max_length": 500}
    assert (twin.input_keys, twin.reply_keys) == (("q",), None)
    assert "other" not in store.conversations(include_empty=True)
    twin.add_chat_history([u(f"t{i}") for i in range(7)])
    assert [m["content"] for m in twin.context_window] == ["t3", "t4", "t5", "t6"]
    assert twin.memo == {"previous_turns": 3, "note": "app summary"}
    assert len(original.full_context) == 7
    twin.register_analysis_handler(lambda *_: None)
    assert len(original.context_window) == 4  # the original keeps its handler
    with pytest.raises(memoryd.InvalidConversationId):
        original.with_conversation("")

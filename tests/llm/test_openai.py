"""OpenAIChat against a stub Chat Completions server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memoryd import messages
from memoryd.llm import LLMError, OpenAIChat


class Stub:
    """Answers POST /v1/chat/completions from a queue of (status, body, headers)."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                stub.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("authorization"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                status, body, headers = stub.replies.pop(0)
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                unstated = headers.pop("x-unstated-length", None)  # a body ended by close
                for key, value in headers.items():
                    self.send_header(key, value)
                if unstated is None:
                    self.send_header("content-length", str(len(data)))
                self.end_headers()
                # a client that stopped reading (an answer over its limit) is no error
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, message: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        return 200, {"choices": [{"index": 0, "message": message}]}, {}


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def model(stub: Stub, **options: Any) -> OpenAIChat:
    delays: list[float] = []
    chat = OpenAIChat(
        "test-model",
        base_url=stub.url,
        api_key="sk-test",
        backoff=0.25,
        sleep=delays.append,
        **options,
    )
    chat.delays = delays  # type: ignore[attr-defined]
    return chat


def test_complete_sends_messages_and_tools_and_returns_the_assistant_message(stub: Stub) -> None:
    """The request carries model, messages, tools and the key; the reply is validated."""
    call = messages.tool_call("c1", "add", {"a": 1})
    stub.replies.append(
        stub.reply({"role": "assistant", "content": None, "tool_calls": [call], "refusal": None})
    )
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    reply = model(stub).complete([messages.user("hi")], tools=tools)
    assert reply == messages.assistant(tool_calls=[call])
    [sent] = stub.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"] == {
        "model": "test-model",
        "messages": [messages.user("hi")],
        "tools": tools,
    }


def test_429_and_5xx_are_retried_with_backoff(stub: Stub) -> None:
    """Retry-After is honoured; otherwise the delay grows; the third attempt succeeds."""
    stub.replies += [
        (429, {"error": {"message": "slow down"}}, {"retry-after": "2"}),
        (503, "unavailable", {}),
        stub.reply({"role": "assistant", "content": "ok"}),
    ]
    chat = model(stub)
    assert chat.complete([messages.user("hi")]) == messages.assistant("ok")
    assert chat.delays[0] == 2.0  # type: ignore[attr-defined]
    assert 0.25 <= chat.delays[1] <= 0.5  # type: ignore[attr-defined]
    assert len(stub.requests) == 3


def test_exhausted_retries_name_the_last_error(stub: Stub) -> None:
    """After max_retries the LLMError says what the server said."""
    stub.replies += [(500, {"error": {"message": "boom"}}, {})] * 2
    with pytest.raises(LLMError, match=r"failed 2 times \(last: HTTP 500: boom\)"):
        model(stub, max_retries=1).complete([messages.user("hi")])


def test_client_errors_are_not_retried(stub: Stub) -> None:
    """A 400 fails at once with the server's message."""
    stub.replies.append((400, {"error": {"message": "bad model"}}, {}))
    with pytest.raises(LLMError, match="HTTP 400: bad model"):
        model(stub).complete([messages.user("hi")])
    assert len(stub.requests) == 1


def test_an_error_answer_is_shown_by_its_message_and_read_only_in_part(stub: Stub) -> None:
    """A 400 whose JSON message is 5 KB is shown by that message (cut to 300 characters;
    a 4 KiB cap used to replace it by "an answer of over 4096 bytes"), and a 2 MB error
    page by its first characters, its rest never read."""
    stub.replies.append((400, {"error": {"message": "too long: " + "m" * 5000}}, {}))
    with pytest.raises(LLMError) as raised:
        model(stub).complete([messages.user("hi")])
    assert f"HTTP 400: too long: {'m' * 290}" in str(raised.value)
    assert len(str(raised.value)) < 500
    stub.replies.append((502, "<html>" + "x" * 2_000_000, {}))
    with pytest.raises(LLMError, match=r"HTTP 502: <html>x+\)") as raised:
        model(stub, max_retries=0).complete([messages.user("hi")])
    assert len(str(raised.value)) < 500


def test_malformed_answers_are_llm_errors(stub: Stub) -> None:
    """Non-JSON bodies, missing choices and invalid messages raise LLMError."""
    stub.replies += [
        (200, "not json", {}),
        (200, {"choices": []}, {}),
        stub.reply({"role": "assistant", "content": None}),
    ]
    chat = model(stub)
    with pytest.raises(LLMError, match="not JSON"):
        chat.complete([messages.user("hi")])
    with pytest.raises(LLMError, match=r"no choices\[0\].message"):
        chat.complete([messages.user("hi")])
    with pytest.raises(LLMError, match="not a valid assistant message"):
        chat.complete([messages.user("hi")])


@pytest.mark.parametrize("stated", [True, False], ids=["content-length", "until-close"])
def test_an_answer_over_max_response_bytes_is_an_llm_error(stub: Stub, stated: bool) -> None:
    """A 200 answer of 2 MB against a 1 MB limit: LLMError naming the limit, whether the
    server states its length (refused before reading) or not (refused as it arrives)."""
    big = {"choices": [{"message": {"role": "assistant", "content": "x" * 2_000_000}}]}
    stub.replies.append((200, big, {} if stated else {"x-unstated-length": "1"}))
    chat = OpenAIChat("m", base_url=stub.url, max_retries=0, max_response_bytes=1_000_000)
    with pytest.raises(LLMError, match="answered with more than 1000000 bytes"):
        chat.complete([messages.user("hi")])
    stub.replies.append(stub.reply({"role": "assistant", "content": "small"}))
    assert chat.complete([messages.user("hi")])["content"] == "small"


def test_an_answer_nested_too_deeply_is_an_llm_error(stub: Stub) -> None:
    """JSON too deep for the decoder is an LLMError like any body that is not JSON."""
    stub.replies.append((200, "[" * 100_000 + "]" * 100_000, {}))
    with pytest.raises(LLMError, match=r"not JSON.*nests too deeply"):
        model(stub).complete([messages.user("hi")])


def test_connection_errors_are_retried_then_reported() -> None:
    """Nothing listening: each attempt fails to connect, then one LLMError."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    delays: list[float] = []
    chat = OpenAIChat(
        "m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, sleep=delays.append, timeout=5
    )
    with pytest.raises(LLMError, match=r"failed 3 times.*ConnectError"):
        chat.complete([messages.user("hi")])
    assert len(delays) == 2


def test_bad_configuration_is_named() -> None:
    """Empty model, bad timeout, retries and URL are refused."""
    with pytest.raises(ValueError, match="model"):
        OpenAIChat("")
    with pytest.raises(ValueError, match="timeout"):
        OpenAIChat("m", timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChat("m", max_retries=-1)
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChat("m", base_url="ftp://x")
    with pytest.raises(ValueError, match="max_response_bytes must be an int >= 1"):
        OpenAIChat("m", max_response_bytes=0)
    assert OpenAIChat("m").max_response_bytes == 32 * 1024 * 1024  # the stated default


def test_replies_of_servers_that_follow_the_api_loosely_are_taken(stub: Stub) -> None:
    """A refusal (``content`` null, ``refusal`` set) is the model's answer; a tool call
    with an empty or missing id gets a unique one, arguments sent as an object become the
    JSON string the API specifies, and a missing ``type`` is ``function``. Each of these
    was an LLMError, so a run failed and a retry called the model again."""
    stub.replies += [
        stub.reply({"role": "assistant", "content": None, "refusal": "I can't help with that"}),
        stub.reply(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "", "type": "function", "function": {"name": "a", "arguments": {}}},
                    {"function": {"name": "b", "arguments": {"x": [1, "é"]}}},
                ],
            }
        ),
    ]
    chat = model(stub)
    assert chat.complete([messages.user("hi")]) == messages.assistant("I can't help with that")
    reply = chat.complete([messages.user("hi")])
    first, second = reply["tool_calls"]
    assert first["id"] and second["id"] and first["id"] != second["id"]
    assert first["function"] == {"name": "a", "arguments": "{}"}
    assert second == {
        "id": second["id"],
        "type": "function",
        "function": {"name": "b", "arguments": '{"x":[1,"é"]}'},
    }

"""Request bodies: decoded within a memory budget, and every malformed one is a JSON 4xx.

Hostile bodies go to a real daemon over its Unix socket; the daemon's peak resident
memory (``VmHWM``, reset through ``/proc/PID/clear_refs``) shows what one body cost.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import msgpack
import pytest

from memoryd import codec
from memoryd.errors import HttpError
from memoryd.server.bodies import (
    MEMORY_FLOOR,
    MEMORY_PER_BODY_BYTE,
    SMALL_MSGPACK_BYTES,
    decode_body,
    json_memory_estimate,
    memory_budget,
)
from tests.server.daemon import Daemon
from tests.server.test_security import raw_request, version

MIB = 1 << 20


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _peak_growth(daemon: Daemon, send: object) -> int:
    """Bytes the daemon's peak RSS grew by while ``send()`` ran."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    before = _status_kib(pid, "VmRSS")
    send()  # type: ignore[operator]
    return (_status_kib(pid, "VmHWM") - before) * 1024


def _empty_arrays_msgpack(count: int) -> bytes:
    """``{"messages": [[], [], ...]}`` in msgpack: one byte per empty array."""
    return b"\x81\xa8messages\xdd" + count.to_bytes(4, "big") + b"\x90" * count


def _empty_arrays_json(count: int) -> bytes:
    return b'{"messages":[' + b",".join([b"[]"] * count) + b"]}"


HOSTILE = {
    "msgpack-empty-arrays": (_empty_arrays_msgpack(16 * MIB), "application/msgpack"),
    "msgpack-nested-arrays": (
        b"\x81\xa8messages\xdd"
        + (1600).to_bytes(4, "big")
        + (b"\xdc" + (10_000).to_bytes(2, "big") + b"\x90" * 10_000) * 1600,
        "application/msgpack",
    ),
    "json-empty-arrays": (_empty_arrays_json(5 * MIB), "application/json"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_body_of_tiny_values_is_refused_within_a_small_multiple_of_its_size(
    daemon: Daemon, name: str
) -> None:
    """A 16 MiB body of empty arrays (which would decode to gigabytes) gets a 400, and
    the daemon's memory grows by less than the budget's multiple of the body."""
    body, kind = HOSTILE[name]
    answers: list[tuple[int, object]] = []

    def send() -> None:
        answers.append(
            raw_request(
                daemon,
                "POST",
                b"/v1/conversations/tiny-values/messages",
                body=body,
                headers={"content-type": kind},
            )
        )

    growth = _peak_growth(daemon, send)
    status, answer = answers[0]
    assert status == 400, answer
    assert isinstance(answer, dict) and "too many small values" in answer["error"]["message"]
    assert growth < (MEMORY_PER_BODY_BYTE + 4) * len(body), f"{growth / MIB:.0f} MiB"
    assert version(daemon, "tiny-values") == 0


DEPTHS = (990, 1000, 5000, 100_000)
BODY_ROUTES = (
    ("POST", b"/v1/conversations/deep/messages"),
    ("POST", b"/v1/conversations/deep/record"),
    ("POST", b"/v1/conversations/deep/import"),
    ("POST", b"/v1/conversations/deep/fork"),
    ("PUT", b"/v1/stores/deep-store"),
    ("POST", b"/v1/stores/deep-store/conversations/deep/messages"),
)


@pytest.mark.parametrize("depth", DEPTHS)
def test_deeply_nested_json_gets_a_json_400_on_every_route_and_no_traceback(
    daemon: Daemon, depth: int
) -> None:
    """JSON nested about 1,000 levels deep or more is a JSON 400 everywhere (never a
    500, never plain text), and the daemon logs no traceback for it."""
    nested = b"[" * depth + b"]" * depth
    body = b'{"messages":[{"role":"user","content":"x","meta":' + nested + b"}]}"
    logged = len(daemon.stderr_lines)
    for method, route in BODY_ROUTES:
        status, answer = raw_request(daemon, method, route, body=body)
        assert 400 <= status < 500, (route, status, answer)
        assert isinstance(answer, dict) and "error" in answer, (route, answer)
    assert not any("Traceback" in line for line in daemon.stderr_lines[logged:])
    assert version(daemon, "deep") == 0


def test_tiny_chat_messages_fit_the_per_byte_budget_alone() -> None:
    """The smallest real messages fit `MEMORY_PER_BODY_BYTE` times their size, without
    the floor, in both formats."""
    messages = [{"role": "user", "content": ""}] * 10_000
    packed = msgpack.packb({"messages": messages})
    per_byte = MEMORY_PER_BODY_BYTE * len(packed)
    assert codec.unpack_wire(packed, max_memory=per_byte, max_items=10_000) == {
        "messages": messages
    }
    text = json.dumps({"messages": messages}).encode()
    assert json_memory_estimate(text, 0) <= MEMORY_PER_BODY_BYTE * len(text)
    assert decode_body(text, "json") == decode_body(packed, "msgpack", 10_000)


def test_brackets_inside_json_strings_do_not_count_as_values() -> None:
    """Text full of brackets and commas is measured by its structure, not its characters."""
    raw = json.dumps({"messages": [{"role": "user", "content": "[{,:" * 500_000}]}).encode()
    assert json_memory_estimate(raw, memory_budget(len(raw))) <= memory_budget(len(raw))
    assert decode_body(raw, "json")["messages"][0]["content"].startswith("[{,:")


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"[" * 5000 + b"]" * 5000, "json"),
        (b"\x91" * 100_000 + b"\xc0", "msgpack"),
        (b"{", "json"),
        (b"\xc1", "msgpack"),
    ],
)
def test_malformed_bodies_are_http_400(raw: bytes, kind: str) -> None:
    """Undecodable or too deeply nested bodies raise a 400 that says so."""
    with pytest.raises(HttpError) as caught:
        decode_body(raw, kind)
    assert caught.value.status == 400
    assert "cannot be decoded" in str(caught.value)


def test_a_small_msgpack_body_of_the_costliest_values_fits_the_floor() -> None:
    """A body up to `SMALL_MSGPACK_BYTES`, decoded unmeasured, stays within `MEMORY_FLOOR`
    even when every byte is an empty map (the costliest one-byte value) or an empty array."""
    count = SMALL_MSGPACK_BYTES - 5
    for one in (b"\x80", b"\x90"):
        raw = b"\xdd" + count.to_bytes(4, "big") + one * count
        tracemalloc.start()
        try:
            decode_body(raw, "msgpack")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= MEMORY_FLOOR, (one, peak)
    small = _empty_arrays_msgpack(SMALL_MSGPACK_BYTES - 15)
    assert len(small) == SMALL_MSGPACK_BYTES
    assert len(decode_body(small, "msgpack")["messages"]) == SMALL_MSGPACK_BYTES - 15
    with pytest.raises(HttpError, match="too many small values"):  # one byte more: measured
        decode_body(_empty_arrays_msgpack(SMALL_MSGPACK_BYTES - 14), "msgpack")

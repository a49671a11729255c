"""Writer child for the I/O-fault runs, started under ``fiu-run -x``.

Usage: python -m tools.reliability.fiu_writer DATA_DIR POINTS MODE VALUE ERRNO COUNT SEED

Opens the store with no fault armed, then arms every libfiu point in POINTS
(comma-separated, e.g. ``posix/io/sync/fdatasync``) through an external callback:
MODE ``nth`` fails the VALUE-th call (counted across the points) once; MODE
``random`` fails each call with probability VALUE. Failures set ``errno`` ERRNO.
Appends COUNT keyed events, retrying a failed one with the same key, and prints:

    FAULT <point> <key>     a call failed while <key> was being written
    ACK <key> <version>     the add returned
    ERR <key> <error type>  the add raised
    READERR <key> <error type>  a read made right after that failed add raised
"""

from __future__ import annotations

import ctypes
import os
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

import memoryd
from tools.reliability.workload import relaxed_intensity

_CB = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.POINTER(ctypes.c_int),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_uint),
)


_PROTOCOL = os.dup(1)
os.dup2(2, 1)  # logs go to stderr; only protocol lines reach stdout


def say(line: str) -> None:
    """Write one protocol line to the parent (the process's real stdout)."""
    os.write(_PROTOCOL, (line + "\n").encode())


def arm(points: str, decide: Callable[[bytes, Any, Any, Any], int]) -> object:
    """Arm each libfiu point in ``points`` (comma-separated) with ``decide`` as its
    external callback: it returns 1 to fail the call (setting ``failinfo[0]`` to the
    errno), 0 to let it run. Keep the returned object alive while armed.

    Exits the process when libfiu is not loaded (not under ``fiu-run -x``).
    """
    try:
        lib = ctypes.CDLL("libfiu.so.0")
    except OSError:
        sys.exit("libfiu is not loaded: run this under fiu-run -x (Debian package fiu-utils)")
    callback = _CB(decide)
    lib.fiu_enable_external.argtypes = [
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_uint,
        _CB,
    ]
    for point in points.split(","):
        if lib.fiu_enable_external(point.encode(), 1, None, 0, callback) != 0:
            sys.exit(f"cannot arm libfiu point {point}")
    return callback


def main(path: str, points: str, mode: str, value: float, err: int, count: int, seed: int) -> None:
    """Run the writer (see the module docstring)."""
    rng = random.Random(seed)
    lock = threading.Lock()
    state = {"calls": 0, "key": "", "armed": False}

    def decide(name: bytes, failnum: object, failinfo: object, flags: object) -> int:
        with lock:
            if not state["armed"]:
                return 0
            state["calls"] += 1
            fail = state["calls"] == int(value) if mode == "nth" else rng.random() < float(value)
        if fail:
            failinfo[0] = err  # type: ignore[index]
            say(f"FAULT {name.decode()} {state['key']}")
            return 1
        return 0

    callback = arm(points, decide)  # noqa: F841 (kept alive while armed)
    with relaxed_intensity():
        store = memoryd.LmdbStore.start(path, name="fiu", call_timeout_s=10.0)
        say("READY")
        state["armed"] = True
        for i in range(count):
            key = f"k{i:05d}"
            state["key"] = key
            for _ in range(20):
                try:
                    batch = [memoryd.messages.user(key), memoryd.messages.assistant(key)]
                    version = store.add("c", batch, idempotency_key=key)
                except (memoryd.StorageError, memoryd.StoreUnavailable) as exc:
                    say(f"ERR {key} {type(exc).__name__}")
                    try:  # reads go on after a failed write (the store restarts if it must)
                        store.get("c", limit=1)
                    except Exception as read_error:  # any type: the audit names it
                        say(f"READERR {key} {type(read_error).__name__}")
                    continue
                say(f"ACK {key} {version}")
                break
        state["armed"] = False
    os._exit(0)


if __name__ == "__main__":
    a = sys.argv
    main(a[1], a[2], a[3], float(a[4]), int(a[5]), int(a[6]), int(a[7]))

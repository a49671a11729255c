"""A quiet library: memoryd writes nothing to stdout, and no actor waits on its logs.

Each program runs in its own process, so the logging set up here is the one a user's
program gets by importing memoryd.
"""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import subprocess
import sys
import textwrap
from pathlib import Path

import structlog

from memoryd.logging import DroppingQueueHandler

_WRITES = 1000


def _python(code: str, **options: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
        **options,
    )


def test_a_program_using_memoryd_prints_only_its_own_line(tmp_path: Path) -> None:
    """Start a store, write, crash it, read: stdout holds only the program's line.

    The crash is logged (supervisors' ``child_terminated``) on stderr, where warnings go
    when the program configured no logging.
    """
    done = _python(
        f"""
        import memoryd
        from supervisors import kill

        store = memoryd.LmdbStore.start({str(tmp_path / "d")!r}, name="quiet")
        store.add("c", [{{"role": "user", "content": "hello"}}])
        kill("quiet")
        store.add("c", [{{"role": "assistant", "content": "hi"}}])
        print("mine:", len(store.get("c")))
        memoryd.shutdown()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mine: 2\n"
    assert "child_terminated" in done.stderr
    assert "store_opened" not in done.stderr  # info is below the default level


def test_structlog_imported_after_memoryd_is_routed_before_anything_logs() -> None:
    """``import memoryd`` loads no structlog, yet an event logged right after structlog's
    first import goes to the standard loggers (stderr), not to structlog's stdout default.
    """
    done = _python(
        """
        import sys
        import memoryd

        assert "structlog" not in sys.modules
        import structlog

        structlog.get_logger("memoryd.tests.late").warning("late_event", n=1)
        print("mine")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mine\n"
    assert "late_event" in done.stderr


def test_a_store_module_imported_directly_is_started_under_the_tree(tmp_path: Path) -> None:
    """Importing a backend's module (not the facade's name) attaches the supervision tree."""
    done = _python(
        f"""
        import sys
        from memoryd.store.lmdb.handle import LmdbStore

        store = LmdbStore.start({str(tmp_path / "d")!r}, name="direct")
        print(store.add("c", [{{"role": "user", "content": "hello"}}]))
        import memoryd
        memoryd.shutdown()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"


def test_full_stdout_and_stderr_pipes_never_block_a_store(tmp_path: Path) -> None:
    """With stdout and stderr pipes that nobody reads, filled to the brim, a program still
    completes 1,000 writes, its store actor crashing (and being logged) halfway."""
    marker = tmp_path / "written"
    script = textwrap.dedent(
        f"""
        import os
        import memoryd
        from supervisors import kill

        for fd in (1, 2):  # fill both pipes: the next blocking write would wait forever
            os.set_blocking(fd, False)
            try:
                while True:
                    os.write(fd, b"x" * 65536)
            except BlockingIOError:
                pass
            os.set_blocking(fd, True)

        store = memoryd.LmdbStore.start({str(tmp_path / "d")!r}, name="blocked")
        for i in range({_WRITES}):
            store.add("c", [{{"role": "user", "content": str(i)}}])
            if i == {_WRITES // 2}:
                kill("blocked")
        with open({str(marker)!r}, "w") as out:
            out.write(str(len(store.get("c"))))
        memoryd.shutdown()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        status = proc.wait(timeout=100)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    assert status == 0
    assert marker.read_text() == str(_WRITES)


def test_basic_config_turns_the_library_logs_on() -> None:
    """``logging.basicConfig(level=logging.INFO)`` shows info events as readable lines on
    stderr, and memoryd adds no line of its own to stdout."""
    done = _python(
        """
        import logging
        logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        import memoryd

        store = memoryd.EphemeralStore.start(name="loud")
        store.add("c", [{"role": "user", "content": "hello"}])
        memoryd.shutdown()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "memoryd.store.actor store_opened store='loud'" in done.stderr
    assert done.stderr.count("store_opened") == 1  # the program's handler alone writes it


def test_configure_writes_json_lines_when_stderr_is_not_a_terminal() -> None:
    """``memoryd.logging.configure()`` picks JSON for a pipe and writes nothing to stdout."""
    done = _python(
        """
        import memoryd
        import memoryd.logging

        memoryd.logging.configure(level="info")
        store = memoryd.EphemeralStore.start(name="json")
        store.add("c", [{"role": "user", "content": "hello"}])
        memoryd.shutdown()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    records = [json.loads(line) for line in done.stderr.splitlines()]
    opened = [r for r in records if r["event"] == "store_opened"]
    assert opened and opened[0]["store"] == "json" and opened[0]["level"] == "info"


def _record(event: str) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "memoryd.test", "msg": event, "levelno": 30})


def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    """The queue handler never waits: records past its size are counted, and once there is
    room a ``log_records_dropped`` notice with that count goes ahead of the next record."""
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.KeyValueRenderer(key_order=["event"]),
        ],
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(allow=("dropped",))],
    )
    handler = DroppingQueueHandler(formatter, maxsize=2)
    for name in ("a", "b", "c", "d", "e"):
        handler.handle(_record(name))
    assert handler.dropped == 3
    lines: queue.Queue[logging.LogRecord] = handler.lines
    assert [lines.get_nowait().getMessage() for _ in range(2)] == ["event='a'", "event='b'"]
    handler.handle(_record("f"))
    assert [lines.get_nowait().getMessage() for _ in range(2)] == [
        "event='log_records_dropped' dropped=3",
        "event='f'",
    ]
    assert lines.empty()


def test_a_library_record_renders_as_one_readable_line_for_any_formatter() -> None:
    """An event logged through structlog reaches a plain stdlib formatter as one line."""
    stream = io.StringIO()
    std = logging.getLogger("memoryd.tests.plain")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    std.addHandler(handler)
    std.setLevel(logging.INFO)
    try:
        structlog.get_logger("memoryd.tests.plain").info("store_opened", store="s", durable=True)
    finally:
        std.removeHandler(handler)
        std.setLevel(logging.NOTSET)
    assert stream.getvalue() == "INFO store_opened store='s' durable=True\n"


def test_a_program_using_supervisors_alone_prints_only_its_own_line() -> None:
    """supervisors without memoryd (structlog unconfigured, which would print every
    event to stdout): a crash's error reaches stderr, INFO events go nowhere, and stdout
    holds only the program's line."""
    done = _python(
        """
        import sys, time
        from supervisors import ChildSpec, Strategy, SupervisedActor, Supervisor, kill, whereis

        class Worker(SupervisedActor):
            pass

        sup = Supervisor.start(name="root", strategy=Strategy.ONE_FOR_ONE, children=[
            ChildSpec(id="w", start=lambda: Worker.start(name="w"))])
        first = whereis("w").actor_urn
        kill("w")
        deadline = time.monotonic() + 10
        while getattr(whereis("w"), "actor_urn", first) == first and time.monotonic() < deadline:
            time.sleep(0.01)
        sup.stop()
        print("mine:", "memoryd" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mine: False\n"
    assert "child_terminated supervisor='root' child='w' reason='killed" in done.stderr
    assert "child_started" not in done.stderr  # INFO: nothing configured takes it


def test_supervisors_events_join_the_programs_logging_when_it_configures_it() -> None:
    """``logging.basicConfig(level=INFO)`` takes supervisors' INFO events as well."""
    done = _python(
        """
        import logging, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
        from supervisors import ChildSpec, SupervisedActor, Supervisor

        class Worker(SupervisedActor):
            pass

        sup = Supervisor.start(name="root", children=[
            ChildSpec(id="w", start=lambda: Worker.start(name="w"))])
        sup.stop()
        print("mine")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mine\n"
    assert "supervisors child_started supervisor='root' child='w'" in done.stderr

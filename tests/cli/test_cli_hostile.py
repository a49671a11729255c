"""The command line used in a hurry or with ill will: Ctrl-C, a reader that goes away,
closed streams, a write that fails, absurd input. Each ends with one line on stderr (no
traceback) and the right status, leaves no half-made file, and the store intact."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli._run import run
from tests.helpers import wait_until

_EVENTS = 100_000


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memoryd.cli", *args]


def _quiet(stderr: str) -> None:
    """Nothing Python prints by itself when a program fails."""
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory of 100,000 events (2,000 conversations of 50): its export takes
    long enough to be interrupted midway."""
    root = tmp_path_factory.mktemp("big")
    dump = root / "dump.jsonl"
    header = {"format": "memoryd-export", "schema": 1, "store": "memoryd.default"}
    with dump.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for c in range(2_000):
            for v in range(1, 51):
                message = {"role": "user", "content": f"{c}-{v} " + "x" * 200}
                event = {"version": v, "kind": "appended", "messages": [message]}
                out.write(json.dumps({"conversation_id": f"c{c}", **event, "timestamp": 1.0}))
                out.write("\n")
        out.write(json.dumps({"end": True, "conversations": 2_000, "events": _EVENTS}) + "\n")
    data = root / "data"
    # a generous deadline: a loaded machine may take more than 10 s for one chunk
    done = run("--timeout", "600", "import", str(dump), "--data", str(data))
    assert done.returncode == 0, done.stderr
    return data


def _sound(data: Path) -> dict[str, object]:
    checked = run("check", "--data", str(data))
    assert checked.returncode == 0, checked.stdout
    report: dict[str, object] = json.loads(checked.stdout)
    return report


def test_an_interrupted_export_leaves_no_file_and_the_old_one_as_it_was(
    big: Path, tmp_path: Path
) -> None:
    """Ctrl-C in the middle of ``export --out FILE`` exits 130 with a line saying so, and
    leaves no partial file: a new FILE is not created, an existing one keeps its bytes."""
    for existing in (False, True):
        out_dir = tmp_path / f"out-{existing}"
        out_dir.mkdir()
        out = out_dir / "export.jsonl"
        if existing:
            out.write_text("the previous export\n", encoding="utf-8")

        def started(out_dir: Path = out_dir, existing: bool = existing) -> bool:
            # the export is under way once it has written bytes into a file of out_dir
            # (its partial file; before the fix, FILE itself)
            files = [p for p in out_dir.iterdir() if p.is_file()]
            return len(files) > int(existing) or any(
                p.stat().st_size != len("the previous export\n") for p in files
            )

        proc = subprocess.Popen(
            _command("export", "--data", str(big), "--out", str(out)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        try:
            wait_until(started, timeout=60)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
        if existing:
            assert os.listdir(out_dir) == ["export.jsonl"]
            assert out.read_text(encoding="utf-8") == "the previous export\n"
        else:
            assert os.listdir(out_dir) == []
        assert proc.returncode == 130, stderr
        _quiet(stderr)
        assert stderr.strip() == "memoryd export: interrupted; with --out, no file was written"
    assert _sound(big)["stores"] == [
        {"path": str(big), "sound": True, "conversations": 2_000, "events": _EVENTS, "problems": []}
    ]


def _file_size_limit(limit: int) -> Callable[[], None]:
    def limited() -> None:  # in the child, before exec: its writes past `limit` fail
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


def test_an_export_whose_writes_fail_leaves_no_partial_file(big: Path, tmp_path: Path) -> None:
    """An ``export --out FILE`` that cannot write its file whole (here a file size limit,
    as a full disk would) exits 1 naming FILE and the cause, and leaves no partial file;
    an existing FILE keeps its bytes."""
    out = tmp_path / "export.jsonl"
    out.write_text("the previous export\n", encoding="utf-8")
    done = subprocess.run(
        _command("export", "--data", str(big), "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        preexec_fn=_file_size_limit(1 << 20),  # Python ignores SIGXFSZ: writes get EFBIG
        check=False,
    )
    assert os.listdir(tmp_path) == ["export.jsonl"]
    assert out.read_text(encoding="utf-8") == "the previous export\n"
    assert done.returncode == 1
    _quiet(done.stderr)
    assert f"cannot export to {out}: File too large" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_export_to_a_device_or_a_symlink_writes_through_it(tmp_path: Path) -> None:
    """``--out /dev/stdout`` writes to stdout, and a symlinked FILE gets the export in the
    file it points to (the link stays a link)."""
    data = tmp_path / "data"
    assert run("add", "c", "--content", "hi", "--data", str(data)).returncode == 0
    shown = run("export", "--data", str(data), "--out", "/dev/stdout")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.splitlines()[0])["format"] == "memoryd-export"
    assert json.loads(shown.stdout.splitlines()[-1]) == {"conversations": 1, "events": 1}
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link.symlink_to(real.name)
    done = run("export", "--data", str(data), "--out", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8").startswith('{"format":"memoryd-export"')


def test_a_reader_that_goes_away_ends_the_command_with_141_and_no_noise(big: Path) -> None:
    """``memoryd tail | head -1``, ``export | head -c 10``: when the reader of stdout is
    gone the command stops with status 141 (128 + SIGPIPE, as a shell reports it for
    any program), prints nothing on stderr, and the store is untouched."""
    for args in (("tail",), ("export",), ("get", "c1"), ("stats",)):
        reader, writer = os.pipe()
        os.close(reader)  # the reader went away before the first write
        try:
            done = subprocess.run(
                _command(*args, "--data", str(big)),
                stdout=writer,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
                env=_env(),
                check=False,
            )
        finally:
            os.close(writer)
        assert (args, done.returncode, done.stderr) == (args, 141, "")
    assert _sound(big)["sound"] is True


def test_ctrl_c_while_a_command_closes_its_store_prints_no_traceback(tmp_path: Path) -> None:
    """Ctrl-C as a command ends (after its output, while it closes the store or exits)
    exits 0 or 130 without a traceback, and the store stays sound."""
    data = tmp_path / "data"
    assert run("add", "c", "--content", "hi", "--data", str(data)).returncode == 0
    for _ in range(5):
        proc = subprocess.Popen(
            _command("get", "c", "--data", str(data)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        try:
            assert proc.stdout is not None
            # the output is written: the command is ending (os.read: communicate reads
            # the pipe itself, past any buffer of proc.stdout)
            first = os.read(proc.stdout.fileno(), 1)
            proc.send_signal(signal.SIGINT)
            rest, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert json.loads(first + rest) == [{"role": "user", "content": "hi"}]
        assert proc.returncode in (0, 130), stderr.decode()
        _quiet(stderr.decode())
    assert _sound(data)["sound"] is True


def _with_closed(fd: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command with file descriptor ``fd`` (0 or 1) closed, as ``<&-``/``>&-`` do."""
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {fd}>&-', "sh", *_command(*args)],
        stdout=subprocess.DEVNULL if fd == 1 else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )


def test_a_closed_stdout_or_stdin_is_said_and_nothing_is_written(tmp_path: Path) -> None:
    """``memoryd add c --content x >&-`` and ``memoryd add c <&-`` exit 1 with one line
    naming the closed stream, and write nothing."""
    data = tmp_path / "data"
    assert run("add", "c", "--content", "first", "--data", str(data)).returncode == 0
    closed_out = _with_closed(1, "add", "c", "--content", "x", "--data", str(data))
    assert closed_out.returncode == 1
    _quiet(closed_out.stderr)
    assert "stdout is closed" in closed_out.stderr
    assert len(closed_out.stderr.strip().splitlines()) == 1
    closed_in = _with_closed(0, "add", "c", "--data", str(data))
    assert closed_in.returncode == 1
    _quiet(closed_in.stderr)
    assert "pipe JSON messages on stdin" in closed_in.stderr
    assert json.loads(run("version", "c", "--data", str(data)).stdout) == {"version": 1}


def test_messages_on_stdin_that_nest_too_deeply_are_refused_in_one_line(tmp_path: Path) -> None:
    """JSON nested 100,000 deep on ``add``'s stdin is refused with exit 1, without a
    RecursionError traceback, and nothing is written."""
    data = tmp_path / "data"
    done = subprocess.run(
        _command("add", "c", "--data", str(data)),
        input="[" * 100_000 + "]" * 100_000,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert done.returncode == 1
    _quiet(done.stderr)
    assert "nests too deeply" in done.stderr
    assert json.loads(run("version", "c", "--data", str(data)).stdout) == {"version": 0}


def test_an_import_of_a_missing_file_creates_no_data_directory(tmp_path: Path) -> None:
    """``memoryd --data NEW import FILE`` with a FILE that is missing, a directory or
    under a file exits 1 naming it, and creates no data directory NEW."""
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    for file, cause in (
        (tmp_path / "missing.jsonl", "No such file or directory"),
        (tmp_path, "Is a directory"),
        (tmp_path / "a-file" / "x.jsonl", "Not a directory"),
    ):
        done = run("import", str(file), "--data", str(tmp_path / "new"))
        assert not (tmp_path / "new").exists()
        assert done.returncode == 1
        _quiet(done.stderr)
        assert f"cannot read {file}: {cause}" in done.stderr


def test_an_import_from_a_pipe_is_whole(big: Path, tmp_path: Path) -> None:
    """``cat export | memoryd import /dev/stdin`` of a file past what an import keeps in
    memory (16 MiB, then it reads the file again) imports every conversation: a pipe
    cannot be read twice, so it is copied to a file first (it used to stop part way
    with "File or stream is not seekable", half imported)."""
    dump = tmp_path / "dump.jsonl"
    assert run("export", "--data", str(big), "--out", str(dump)).returncode == 0
    assert dump.stat().st_size > 16 << 20
    target = tmp_path / "target"
    with subprocess.Popen(["cat", str(dump)], stdout=subprocess.PIPE) as cat:
        done = subprocess.run(
            _command("import", "/dev/stdin", "--data", str(target)),
            stdin=cat.stdout,  # a pipe, not the file
            capture_output=True,
            text=True,
            timeout=300,
            env=_env(),
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == 2_000
    assert json.loads(done.stdout)["events_written"] == _EVENTS

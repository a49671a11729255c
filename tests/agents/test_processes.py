"""Agent systems across real processes: ``kill -9`` mid-run and recovery by a new process
(LMDB, the daemon, Redis), and two processes over one daemon sharing an instance."""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from pathlib import Path

import lmdb
import pytest

import memoryd
from memoryd.agents.lease import LEASE_PREFIX
from memoryd.store.lmdb import keys
from memoryd.store.lmdb.check import check_store
from memoryd.store.requests import HIDDEN_PREFIX
from tests.agents import _agents
from tests.agents._child import open_store
from tests.agents._spawn import child
from tests.helpers import wait_until
from tests.server.daemon import Daemon

INSTANCES = 20


@pytest.fixture(params=["lmdb", "remote", "redis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _spec(request, tmp_path)


@pytest.fixture(params=["remote", "redis"])
def shared_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store two live processes can share (an LMDB directory is one process's)."""
    return _spec(request, tmp_path)


def _spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "lmdb":
        return f"lmdb:{tmp_path / 'data'}"
    if request.param == "remote":
        daemon: Daemon = request.getfixturevalue("daemon")
        return f"remote:{daemon.address}/agents-{uuid.uuid4().hex[:8]}"
    server = request.getfixturevalue("redis_server")
    server.flush()
    return f"redis:{server.url}"


def test_instances_killed_mid_run_are_all_resumed_by_a_new_process(
    store_spec: str, tmp_path: Path
) -> None:
    """20 instances blocked in step 2 of 4 die with SIGKILL; a new process starts the
    system with recover="resume" and no ids; every run finishes and every tool side
    effect happened exactly once."""
    effects = tmp_path / "effects"
    crashing = child("crash", store_spec, str(effects), str(INSTANCES))
    try:
        wait_until(
            lambda: (
                len(list(tmp_path.glob("effects.*.blocked"))) == INSTANCES
                or crashing.poll() is not None
            ),
            timeout=120,
        )
        assert crashing.poll() is None, crashing.communicate()[1]
    finally:
        crashing.send_signal(signal.SIGKILL)
        crashing.wait()
    lines = effects.read_text().split("\n")[:-1]
    assert Counter(line.split()[1] for line in lines) == {"0": INSTANCES, "1": INSTANCES}
    recovering = child("recover", store_spec, str(effects))
    out, err = recovering.communicate(timeout=300)
    assert recovering.returncode == 0, err
    assert out.strip() == f"recovered {INSTANCES}"
    done = Counter(effects.read_text().split("\n")[:-1])
    assert done == {f"k{n} {step}": 1 for n in range(INSTANCES) for step in range(4)}
    if store_spec.startswith("lmdb:"):  # the killed runs' journals, resumed, left nothing
        data = Path(store_spec.removeprefix("lmdb:"))
        assert check_store(data).problems == []
        env = lmdb.open(str(data), max_dbs=8, readonly=True, lock=False)
        try:
            with env.begin() as txn:
                names = env.open_db(keys.NAMES_DB, txn=txn, create=False)
                ids = [bytes(k).decode() for k, _ in txn.cursor(db=names)]
        finally:
            env.close()
        # only the instances' leases (one memo each, kept while instances may run) are left
        assert [i for i in ids if i.startswith(HIDDEN_PREFIX)] == sorted(
            f"{LEASE_PREFIX}w/k{n}" for n in range(INSTANCES)
        )
    if store_spec.startswith("remote:"):  # a daemon over LMDB erases them as well
        address, _, name = store_spec.removeprefix("remote:").rpartition("/")
        stats = memoryd.connect(address, store=name).stats()
        assert stats["conversations_ever"] == 2 * INSTANCES  # conversations and leases


def test_two_processes_over_one_daemon_never_run_one_instance_at_once(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Both call instance w/shared 5 times; its tool's start/end marks never interleave,
    and the conversation holds all ten turns."""
    effects = tmp_path / "effects"
    name = f"shared-{uuid.uuid4().hex[:8]}"
    spec = f"remote:{daemon.address}/{name}"
    procs = [child("share", spec, str(effects), "5") for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert out.strip() == "shared done"
    marks = effects.read_text().split("\n")[:-1]
    assert len(marks) == 2 * 5 * 2 * 2  # 2 processes, 5 calls, 2 tool steps, start and end
    for start, end in zip(marks[::2], marks[1::2], strict=True):
        assert start.split()[0] == "start" and end == f"end {start.split()[1]}"
    store = memoryd.connect(daemon.address, store=name)
    users = [m for m in store.get("w/shared") if m["role"] == "user"]
    assert len(users) == 10


def test_a_request_id_whose_run_a_live_process_holds_runs_no_tool_again(
    shared_spec: str, tmp_path: Path, systems: list[memoryd.agents.AgentSystem]
) -> None:
    """A process leaves the run of request id ``job`` pending after its first tool step
    and lives on, holding the run's lease. The same request id called from another
    process is refused, naming the process that holds it, and runs no tool: it ran the
    run again from its input (the tool's side effect twice), then failed on the
    journal with ConflictError."""
    effects = tmp_path / "effects"
    holder = child("left", shared_spec, str(effects))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "left", holder.stderr
        assert effects.read_text().splitlines() == ["k0 0"]
        store = open_store(shared_spec)
        note = _agents.file_note_tool(effects, "k0")
        agents = {"w": _agents.factory(store, lambda: _agents.stepping_model(2), note)}
        system = _agents.start(systems, agents, store=store)
        with pytest.raises(ValueError, match="held by the live process"):
            system.call("w", "k0", "job 0", request_id="job", timeout=30)
        assert effects.read_text().splitlines() == ["k0 0"]
    finally:
        holder.kill()
        holder.wait()

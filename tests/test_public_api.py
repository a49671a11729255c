"""The curated facades stay curated: __all__ is sorted, complete and importable."""

import importlib

import pytest

from tests.helpers import python_prints


@pytest.mark.parametrize("package", ["memoryd", "supervisors"])
def test_all_names_exist_and_are_sorted(package: str) -> None:
    """Every name in __all__ is importable, and __all__ is in sorted order."""
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("package", ["memoryd", "supervisors"])
def test_no_public_name_is_left_out_of_all(package: str) -> None:
    """Public (non-underscore, non-module) attributes are listed in __all__."""
    import types

    module = importlib.import_module(package)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - set(module.__all__) == set()


def test_supervisors_never_imports_memoryd() -> None:
    """The supervision package is generic: no module of it mentions memoryd."""
    from pathlib import Path

    import supervisors

    root = Path(supervisors.__file__).parent
    offenders = [
        p.name
        for p in root.glob("*.py")
        if "import memoryd" in p.read_text() or "from memoryd" in p.read_text()
    ]
    assert offenders == []


def test_contract_names_from_the_design_are_exported() -> None:
    """The names users and tests call, per the design's public contract."""
    import memoryd
    import supervisors

    for name in [
        "LmdbStore",
        "EphemeralStore",
        "default_store",
        "whereis",
        "shutdown",
        "Event",
        "Change",
        "ChatStore",
        "MemorydError",
        "InvalidMessage",
        "InvalidConversationId",
        "ConflictError",
        "AlreadyStarted",
        "StoreUnavailable",
        "WriteTimeout",
        "StorageError",
        "messages",
    ]:
        assert hasattr(memoryd, name), name
    for name in [
        "Supervisor",
        "DynamicSupervisor",
        "ChildSpec",
        "Restart",
        "Strategy",
        "SupervisedActor",
        "whereis",
        "register",
        "kill",
    ]:
        assert hasattr(supervisors, name), name


def test_importing_memoryd_leaves_the_agent_stacks_unloaded_until_used() -> None:
    """`import memoryd` loads the stores, not the agent, kernel, provider, memory or client
    modules; the first use of one of their names loads it."""
    code = (
        "import sys, memoryd\n"
        "stacks = ('memoryd.agent', 'memoryd.kernel', 'memoryd.provider', 'memoryd.memory',"
        " 'memoryd.client.remote', 'memoryd.store.redis.handle')\n"
        "print(sorted(m for m in stacks if m in sys.modules))\n"
        "memoryd.Agent, memoryd.window\n"
        "print(sorted(m for m in stacks if m in sys.modules))\n"
    )
    out = python_prints(code)
    assert out[0] == "[]"
    assert "'memoryd.agent'" in out[1] and "'memoryd.provider'" in out[1]

"""The redis-py versions the Redis backend supports: the installed one, and setup.cfg's pin.

`memoryd.store.redis.connections` uses redis-py's connection internals, which a new
major version may change; `SUPPORTED_REDIS_MAJORS` lists the majors it works with, and
setup.cfg must admit exactly those, so the constant and the pin cannot drift apart.
"""

from __future__ import annotations

import configparser
import pathlib

import redis
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from memoryd.store.redis.connections import SUPPORTED_REDIS_MAJORS

SETUP_CFG = next(
    parent / "setup.cfg"
    for parent in pathlib.Path(__file__).resolve().parents
    if (parent / "setup.cfg").is_file()
)
"""The repository's setup.cfg: the nearest one above this file, wherever the test lives."""


def redis_pins(setup_cfg: pathlib.Path) -> list[SpecifierSet]:
    """The version specifier of every ``redis`` requirement in ``setup_cfg`` (install
    requirements and every extra; ``%(name)s`` references are not requirements)."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(setup_cfg, encoding="utf-8")
    values = [config.get("options", "install_requires", fallback="")]
    if config.has_section("options.extras_require"):
        values += [value for _, value in config.items("options.extras_require")]
    pins = []
    for value in values:
        for raw in value.splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("%("):
                continue
            requirement = Requirement(line)
            if requirement.name.lower() == "redis":
                pins.append(requirement.specifier)
    return pins


def admitted_majors(specifier: SpecifierSet) -> set[int]:
    """The major versions (0 to 99) of which ``specifier`` admits any release."""
    probes = ("0", "0.1", "1.0", "5.7", "99.99")
    return {
        major
        for major in range(100)
        if any(specifier.contains(f"{major}.{probe}") for probe in probes)
    }


def test_installed_redis_py_major_is_supported() -> None:
    """The installed redis-py's major version is one connections.py is known to work with."""
    major = int(redis.__version__.split(".")[0])
    assert major in SUPPORTED_REDIS_MAJORS, (
        f"redis-py {redis.__version__} is installed; memoryd's Redis backend supports "
        f"majors {SUPPORTED_REDIS_MAJORS}: install one of them, or check connections.py "
        "against the new major and add it to SUPPORTED_REDIS_MAJORS and setup.cfg"
    )


def test_setup_cfg_pins_redis_to_the_supported_majors() -> None:
    """Every redis requirement in setup.cfg admits exactly SUPPORTED_REDIS_MAJORS."""
    pins = redis_pins(SETUP_CFG)
    assert pins, "setup.cfg names no redis requirement"
    for pin in pins:
        assert admitted_majors(pin) == set(SUPPORTED_REDIS_MAJORS), (
            f"setup.cfg pins redis{pin}, which admits majors {sorted(admitted_majors(pin))}; "
            f"connections.py supports {SUPPORTED_REDIS_MAJORS}"
        )


def test_the_pin_check_tells_a_drifted_pin(tmp_path: pathlib.Path) -> None:
    """A setup.cfg whose redis pin is open-ended or narrower is read as other majors."""
    setup_cfg = tmp_path / "setup.cfg"
    setup_cfg.write_text(
        "[options]\ninstall_requires =\n    redis>=5\n"
        "[options.extras_require]\nredis =\n    redis>=6,<7  # a comment\n    hiredis>=2\n"
        "all =\n    %(redis)s\n",
        encoding="utf-8",
    )
    open_ended, narrow = redis_pins(setup_cfg)
    assert admitted_majors(open_ended) == set(range(5, 100))
    assert admitted_majors(narrow) == {6}
    assert admitted_majors(SpecifierSet(">=5.3,<9")) == {5, 6, 7, 8}

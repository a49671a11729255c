"""`memoryd.cli.parser`: where the options of a store command may go."""

from __future__ import annotations

import pytest

from memoryd.cli.parser import parser


def test_where_options_go_before_or_after_the_command() -> None:
    """--address before the command and --store after it both arrive."""
    args = parser().parse_args(["--address", "unix:///s.sock", "get", "c1", "--store", "notes"])
    assert (args.command, args.cid, args.address, args.store) == (
        "get",
        "c1",
        "unix:///s.sock",
        "notes",
    )


def test_an_option_left_out_is_absent_not_none() -> None:
    """So an option given before the command is not reset by the command's own parser."""
    args = parser().parse_args(["--token", "t", "version", "c1"])
    assert args.token == "t"
    assert not hasattr(args, "address")
    assert not hasattr(args, "json")


def test_serve_needs_a_data_directory() -> None:
    """``memoryd serve`` without --data is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["serve"])
    assert exited.value.code == 2


def test_a_command_is_required() -> None:
    """No command is a usage error."""
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([])
    assert exited.value.code == 2

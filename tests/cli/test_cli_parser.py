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


@pytest.mark.parametrize(
    "argv",
    [
        ["--address", "unix:///s.sock", "get", "c1", "--limit", "5", "--store", "notes"],
        ["add", "c", "--role", "user", "--content", "hi", "--json"],
        ["--store", "get", "version", "c"],
        ["tail", "-f", "--after", "3"],
        ["import", "f.jsonl", "--workers", "2"],
        ["serve", "--data", "d", "--listen", "127.0.0.1:1", "--log-level", "warning"],
    ],
)
def test_a_parser_built_for_its_arguments_parses_them_as_the_full_one(argv: list[str]) -> None:
    """Building only the named commands' options changes nothing that is parsed."""
    assert vars(parser(argv).parse_args(argv)) == vars(parser().parse_args(argv))


def test_a_parser_built_for_its_arguments_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``memoryd --help`` lists every command, though none of them got its options."""
    with pytest.raises(SystemExit):
        parser(["--help"]).parse_args(["--help"])
    short = capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    assert short == capsys.readouterr().out

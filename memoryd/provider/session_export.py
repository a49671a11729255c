"""The exported session document: its format tag and its JSON and YAML text. Pure.

`Session.to_dict` builds the document (``format`` first, then the history, the window,
the memo, the settings and the keys); `dump` writes it as text and `parse` reads text
back, for `Session.from_dict` to check and restore.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from memoryd._json_values import loads

__all__ = ["FORMAT", "Syntax", "dump", "parse"]

FORMAT = "memoryd.session/1"
"""The ``format`` value of an exported session."""

Syntax: TypeAlias = Literal["json", "yaml"]


def dump(document: Mapping[str, Any], syntax: Syntax) -> str:
    """Write an exported session as text.

    Args:
        document: What `Session.to_dict` returned.
        syntax: ``"json"`` (indented, unicode kept) or ``"yaml"`` (keys in order).

    Returns:
        The text.
    """
    if syntax == "json":
        return json.dumps(document, ensure_ascii=False, indent=2)
    import yaml  # noqa: PLC0415 - on first use: 10-40 ms of import a run never needs

    text = yaml.dump(dict(document), Dumper=_dumper(yaml), allow_unicode=True, sort_keys=False)
    return str(text)


@functools.cache
def _dumper(yaml: Any) -> Any:
    """A safe dumper that writes a value shared by two places twice, never as an anchor
    and an alias: `parse` refuses aliases. Made once (``yaml`` is imported on first use)."""

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return Dumper


@functools.cache
def _loader(yaml: Any) -> Any:
    """A safe loader that refuses aliases: an export holds none (`dump`), and a few
    lines of nested aliases expand to billions of values (a "billion laughs")."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"the alias *{event.anchor} is refused: a session export holds no aliases",
                    event.start_mark,
                )
            return super().compose_node(parent, index)

    return Loader


def parse(text: str, syntax: Syntax) -> Any:
    """Read the text of an exported session (whether it is one is checked on restore).

    Args:
        text: What `dump` wrote.
        syntax: ``"json"`` or ``"yaml"``.

    Returns:
        The parsed data.

    Raises:
        ValueError: The text does not parse.
    """
    if syntax == "json":
        try:
            return loads(text)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"session JSON does not parse: {exc}") from None
    import yaml  # noqa: PLC0415 - as in `dump`

    try:
        return yaml.load(text, Loader=_loader(yaml))
    except RecursionError:
        raise ValueError("session YAML does not parse: it nests too deeply") from None
    except (TypeError, ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"session {syntax.upper()} does not parse: {exc}") from None

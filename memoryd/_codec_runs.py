"""Many stored event records checked and decoded at once: the reads of one-message events.

A history read of one-message events decodes one record per message. Checked one at
a time, each record costs several Python calls (its checksum, its decode, its field
checks); the functions here check and decode a run of records with a fixed number of
calls whatever its length: the checksums in one pass, the records in one msgpack
decode, the fields in one pass each. They refuse what `memoryd.codec`'s one-record
functions refuse, without saying which record failed: a caller that needs to name it
checks the records one by one (`memoryd.codec.unseal`,
`memoryd.codec.unpack_kind_and_messages`). Pure, like the codec they extend.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import chain, repeat
from operator import getitem, itemgetter
from typing import Any, cast

from memoryd._codec_msgpack import Buffer, pack_value, unpack_bounded
from memoryd.codec import (
    _CRC32_RESIDUE,
    MAX_RECORD_BYTES,
    SEAL_BYTES,
    SUPPORTED_SCHEMA_VERSIONS,
    _corrupt,
    _crc32,
    unpack_kind_and_packed_messages,
)
from memoryd.errors import CorruptRecord
from memoryd.events import KINDS

__all__ = ["unseal_all", "unseal_kinds_and_messages", "unseal_kinds_and_packed_messages"]


_STRIP_SEAL = slice(None, -SEAL_BYTES)
_SCHEMA_VERSION_KIND_MESSAGES = itemgetter("s", "v", "k", "m")


def unseal_all(keys: Sequence[bytes], framed: Sequence[Buffer]) -> None:
    """Check many values written by `seal`: ``framed[i]`` under ``keys[i]``.

    Raises:
        CorruptRecord: the counts differ, or a value is shorter than a checksum or
            fails its checksum.
    """
    if len(keys) != len(framed):
        _corrupt(f"{len(framed)} stored values for {len(keys)} keys")
    if not framed:
        return
    if set(map(_crc32, framed, map(_crc32, keys))) != {_CRC32_RESIDUE} or (
        min(map(len, framed)) < SEAL_BYTES
    ):
        _corrupt("a stored value fails its checksum: its bytes are damaged")


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def unseal_kinds_and_messages(
    keys: Sequence[bytes],
    framed: Sequence[Buffer],
    versions: Sequence[int],
    *,
    max_bytes: int = MAX_RECORD_BYTES,
) -> tuple[Sequence[str], Sequence[list[dict[str, Any]]]]:
    """`unseal` and `unpack_kind_and_messages` of many event records, in one pass each.

    Every checksum is checked, every record must hold the version it is read for
    (``versions[i]`` for ``framed[i]``), and the records are decoded under the same
    bounds as one by one (no ext types, no binary data, str map keys, lengths capped
    by the input) in a single msgpack decode of the records back to back.

    Args:
        keys: the key each record was read under.
        framed: the stored records, sealed.
        versions: the version each record must hold.
        max_bytes: the largest record to accept.

    Returns:
        ``(kinds, messages)``: for each record its kind and its messages (fresh dicts),
        in the order given.

    Raises:
        CorruptRecord: a record fails its checksum, does not decode, or holds another
            version, schema, kind or messages than `unpack_kind_and_messages` accepts.
            The message does not say which record: check them one by one to name it.
    """
    unseal_all(keys, framed)
    count = len(framed)
    if not count:
        return (), ()
    unsealed = cast("map[Buffer]", map(getitem, framed, repeat(_STRIP_SEAL)))
    body = b"".join((_array_header(count), *unsealed))
    if len(body) > max_bytes and max(map(len, framed)) > max_bytes + SEAL_BYTES:
        _corrupt(f"an event record is over {max_bytes} bytes")
    # an empty record adds no value: the decode runs short and fails
    records = unpack_bounded(body, allow_bytes=False, max_bytes=len(body), what="event records")
    if type(records) is not list or len(records) != count:
        _corrupt("event records do not decode to one value each")
    try:
        schemas, found, kinds, messages = zip(
            *map(_SCHEMA_VERSION_KIND_MESSAGES, records), strict=True
        )
        known_kinds = set(kinds) <= KINDS  # only a str equals a str
    except (KeyError, TypeError) as exc:  # not a map, a field missing, an unhashable kind
        raise CorruptRecord(f"an event record is not a map of its fields ({exc!r})") from None
    if found != tuple(versions):
        _corrupt("an event record holds another version than its key")
    if set(map(type, schemas)) != {int} or not set(schemas) <= SUPPORTED_SCHEMA_VERSIONS:
        _corrupt("an event record has a schema version this memoryd does not read")
    if not known_kinds:
        _corrupt(f"an event record has a kind not one of {sorted(KINDS)}")
    if set(map(type, messages)) != {list} or not (
        set(map(type, chain.from_iterable(messages))) <= {dict}
    ):
        _corrupt("event record messages are not an array of maps")
    return kinds, messages


def _packed_layout() -> re.Pattern[bytes]:
    """The sealed record `pack_event_fields` writes for an event without idempotency
    key and data: a map of exactly s, v, k, m, t in that order. Its last field is a
    float64 of fixed length, so the messages end exactly 15 bytes (the ``t`` field and
    the seal) before the value does, whatever they hold."""
    schemas = b"|".join(re.escape(pack_value(v)) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))
    kinds = b"|".join(re.escape(pack_value(kind)) for kind in sorted(KINDS))
    return re.compile(
        rb"\x85\xa1s(?:" + schemas + rb")"
        rb"\xa1v(?:[\x00-\x7f]|\xcc.|\xcd.{2}|\xce.{4}|\xcf.{8})"
        rb"\xa1k(" + kinds + rb")"
        rb"\xa1m([\x90-\x9f]|\xdc.{2}|\xdd.{4})(.*)"
        rb"\xa1t\xcb.{8}.{4}",
        re.DOTALL,
    )


_PACKED_LAYOUT = _packed_layout()
_KIND_OF = {pack_value(kind): kind for kind in KINDS}
_FIXARRAY_COUNT = {bytes((0x90 | n,)): n for n in range(16)}
_GROUPS: Any = re.Match.groups


def unseal_kinds_and_packed_messages(
    keys: Sequence[bytes], framed: Sequence[Buffer]
) -> tuple[Sequence[str], Sequence[int], Sequence[bytes]]:
    """`unseal` and `unpack_kind_and_packed_messages` of many event records.

    Every checksum is checked in one pass. A record of the layout the writer gives an
    event without idempotency key and data (the common one) is read by one match of
    that layout, which checks its schema version and kind and finds its messages by
    their position; any other record is read by `unpack_kind_and_packed_messages`.

    Returns:
        ``(kinds, message counts, the messages of each record back to back)``, in the
        order given.

    Raises:
        CorruptRecord: a record fails its checksum, or as
            `unpack_kind_and_packed_messages`. The message does not say which record.
    """
    unseal_all(keys, framed)
    matches = list(map(_PACKED_LAYOUT.fullmatch, framed))
    if None in matches:
        return _kinds_and_packed_one_by_one(framed, matches)
    kind_bytes, heads, packed = zip(*map(_GROUPS, matches), strict=True)
    counts = cast("list[int]", list(map(_FIXARRAY_COUNT.get, heads)))
    if None in counts:  # an event of 16 messages or more
        counts = [
            int.from_bytes(head[1:], "big") if len(head) > 1 else head[0] & 0x0F for head in heads
        ]
    return list(map(_KIND_OF.__getitem__, kind_bytes)), counts, packed


def _kinds_and_packed_one_by_one(
    framed: Sequence[Buffer], matches: list[re.Match[bytes] | None]
) -> tuple[list[str], list[int], list[bytes]]:
    kinds: list[str] = []
    counts: list[int] = []
    packed: list[bytes] = []
    for value, match in zip(framed, matches, strict=True):
        if match is None:
            kind, count, messages = unpack_kind_and_packed_messages(value[:-SEAL_BYTES])
        else:
            kind_byte, head, messages = match.groups()
            kind = _KIND_OF[kind_byte]
            count = int.from_bytes(head[1:], "big") if len(head) > 1 else head[0] & 0x0F
        kinds.append(kind)
        counts.append(count)
        packed.append(messages)
    return kinds, counts, packed

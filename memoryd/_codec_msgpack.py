"""Bounded, plain msgpack: the rules every encoding in `memoryd.codec` follows.

`pack_bounded` refuses, before writing, anything the matching unpack would refuse, and
anything larger than its limit; `unpack_bounded` caps the input length before decoding,
caps every str/bin/array/map length by the input length, requires str map keys (or
bytes, where allowed), refuses msgpack ext types (timestamps included) and never
unpickles. Undecodable bytes raise `CorruptRecord`, never a msgpack exception.
A network body may also be given a memory budget (`unpack_wire`'s ``max_memory``): the
decode stops, with `CorruptRecord`, once the objects it built would take more than that.

Internal values (`pack_value`) and network bodies (`pack_wire`) are these rules applied
directly; `memoryd.codec` re-exports them and builds the event records on the same two
functions. Together with `memoryd.codec`, the only module that imports msgpack.
"""

from __future__ import annotations

import sys
from itertools import repeat
from typing import Any, NoReturn, TypeAlias

import msgpack

from memoryd.errors import CorruptRecord

__all__ = [
    "MAX_VALUE_BYTES",
    "MAX_WIRE_BYTES",
    "Buffer",
    "pack_bounded",
    "pack_packed_array_map",
    "pack_value",
    "pack_wire",
    "split_packed",
    "unpack_bounded",
    "unpack_map_holding_packed",
    "unpack_value",
    "unpack_wire",
]

MAX_VALUE_BYTES = 64 << 20
"""The largest internal value `pack_value` writes and `unpack_value` reads (64 MiB)."""

MAX_WIRE_BYTES = 1 << 30
"""The largest network body `pack_wire` writes and `unpack_wire` reads by default (1 GiB)."""

Buffer: TypeAlias = bytes | bytearray | memoryview
"""What every unpack accepts."""

_MAX_DEPTH = 512


class _RefusedExt(ValueError):
    """Raised by the ext hook: memoryd never writes msgpack ext types."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _refuse_ext(code: int, data: bytes) -> NoReturn:
    raise _RefusedExt(code)


_SCALAR_BYTES = {str: 56, float: 32, int: 36, bytes: 40}
"""What one scalar element costs in memory at most, its pointer included, beyond
the payload a str or bytes carries (which the body carries too)."""


_EMPTY_BYTES = 64
"""An empty list (56 bytes) or dict (64)."""


class _Budget:
    """Hooks msgpack calls for every array and map it builds: they charge what each
    costs in memory (the container, its slots, its scalar elements) and stop the
    decode once the total passes ``memory`` bytes, or the containers ``containers``.

    A container is charged when it is complete, so at most one container's worth
    (bounded by ``max_array_len``/``max_map_len``) is built past the budget. Each hook
    is a Python call (about a microsecond), so the container count bounds the time.
    """

    __slots__ = ("containers", "memory", "refusal")

    def __init__(self, memory: int, containers: int, refusal: str) -> None:
        self.memory = memory
        self.containers = containers
        self.refusal = refusal

    def _charge(self, cost: int) -> None:
        self.memory -= cost
        self.containers -= 1
        if self.memory < 0 or self.containers < 0:
            raise CorruptRecord(self.refusal)  # passes through msgpack as it is

    def on_list(self, value: list[Any]) -> list[Any]:
        if value:  # the element loop runs in map/sum, not in Python bytecode
            self._charge(
                sys.getsizeof(value) + sum(map(_SCALAR_BYTES.get, map(type, value), repeat(8)))
            )
        else:
            self._charge(_EMPTY_BYTES)
        return value

    def on_map(self, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            values = value.values()
            self._charge(
                sys.getsizeof(value) + sum(map(_SCALAR_BYTES.get, map(type, values), repeat(8)))
            )
        else:
            self._charge(_EMPTY_BYTES)
        return value


# --------------------------------------------------------------------------- packing


def _check_packable(value: Any, allow_bytes: bool, depth: int = 0) -> None:
    """Refuse anything the matching unpack would refuse, before it is written.

    Raises:
        ValueError: ``value`` holds a type other than str, int, float, bool, None,
            list/tuple, dict (and bytes when allowed), or nests past msgpack's limit.
    """
    if depth > _MAX_DEPTH:
        raise ValueError(f"value nests deeper than {_MAX_DEPTH} levels")
    if isinstance(value, str | int | float | bool) or value is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) and not (allow_bytes and isinstance(key, bytes)):
                raise ValueError(f"map key {key!r} is a {type(key).__name__}, not a str")
            _check_packable(item, allow_bytes, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_packable(item, allow_bytes, depth + 1)
        return
    if allow_bytes and isinstance(value, bytes):
        return
    raise ValueError(f"a {type(value).__name__} cannot be stored; use JSON-compatible values")


_POOLED_PACK_BYTES = 1 << 20
_packers: list[msgpack.Packer] = []
"""Idle packers with ``msgpack.packb``'s settings. A packer is not thread-safe, so each
pack takes one (``list.pop`` and ``append`` are atomic) and puts it back; a packer
resets itself after a value it cannot pack. Building one per pack costs more than
the pack of a small record."""


def pack_bounded(
    obj: Any, *, allow_bytes: bool, max_bytes: int, what: str, trusted: bool = False
) -> bytes:
    """Encode ``obj`` as msgpack under memoryd's rules.

    Args:
        obj: The value.
        allow_bytes: bytes values and keys may be stored.
        max_bytes: The largest encoding to produce.
        what: What ``obj`` is, for error messages ("event", "value", "body").
        trusted: ``obj`` was already checked, so the pre-pack walk over it is skipped.

    Returns:
        The encoded bytes.

    Raises:
        ValueError: ``obj`` holds a value that cannot be stored, or encodes to more than
            ``max_bytes``.
    """
    try:
        if not trusted:
            _check_packable(obj, allow_bytes)
        try:
            packer = _packers.pop()
        except IndexError:
            packer = msgpack.Packer(use_bin_type=True, datetime=False)
        packed = packer.pack(obj)  # an error drops the packer (it reset itself anyway)
        if len(packed) <= _POOLED_PACK_BYTES:
            _packers.append(packer)  # a packer keeps its buffer: not one grown past this
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{what} cannot be encoded: {exc}") from exc
    if len(packed) > max_bytes:
        raise ValueError(f"{what} is {len(packed)} bytes encoded; the limit is {max_bytes}")
    return packed


def pack_value(obj: Any, *, max_bytes: int = MAX_VALUE_BYTES) -> bytes:
    """Encode a small internal value (metadata, index entries).

    Args:
        obj: str, int, float, bool, None, bytes, or lists/tuples/dicts of them; dict keys
            must be str or bytes. Tuples decode as lists.
        max_bytes: The largest encoding to produce.

    Returns:
        The encoded bytes.

    Raises:
        ValueError: ``obj`` holds a value that cannot be stored or encodes to more than
            ``max_bytes``.
    """
    return pack_bounded(obj, allow_bytes=True, max_bytes=max_bytes, what="value")


def pack_wire(obj: Any, *, max_bytes: int = MAX_WIRE_BYTES, trusted: bool = False) -> bytes:
    """Encode a JSON-compatible value as an ``application/msgpack`` network body.

    Args:
        obj: str, int, float, bool, None, and lists/tuples/dicts (str keys) of them.
        max_bytes: The largest body to produce.
        trusted: the value holds only validated messages and plain values, so the
            pre-pack walk over it is skipped.

    Returns:
        The body bytes.

    Raises:
        ValueError: ``obj`` holds a value JSON cannot carry, or encodes past ``max_bytes``.
    """
    return pack_bounded(obj, allow_bytes=False, max_bytes=max_bytes, what="body", trusted=trusted)


# --------------------------------------------------------------------------- unpacking


def _unpackb(
    data: Buffer,
    size: int,
    *,
    allow_bytes: bool,
    what: str = "value",
    max_memory: int | None = None,
    max_items: int = 0,
) -> Any:
    """msgpack's decode with memoryd's rules: str keys, no ext types, no collection or
    str longer than the input could hold, bytes only where ``allow_bytes``, and the
    objects built at most ``max_memory`` bytes (when given)."""
    hooks: dict[str, Any] = {}
    longest = size
    if max_memory is not None:
        # at most one array or map per 32 input bytes (an event or a message takes more),
        # and a few per item the route allows (a message's content parts, tool calls)
        refusal = (
            f"{what} of {size} bytes holds too many small values for its size: decoded, it "
            f"would take more than {max_memory} bytes, or hold more arrays and maps than one "
            "per 32 bytes"
        )
        budget = _Budget(max_memory, 4 * max_items + size // 32 + 64, refusal)
        hooks = {"list_hook": budget.on_list, "object_hook": budget.on_map}
        # A container is charged once complete, so its length bounds what is built past
        # the budget: at most ``max_items``, or one element per 64 input bytes if more.
        longest = max(1, min(size, max(max_items, size // 64)))
    return msgpack.unpackb(
        data,
        raw=False,
        use_list=True,
        strict_map_key=True,
        ext_hook=_refuse_ext,
        max_ext_len=0,
        max_bin_len=size if allow_bytes else 0,
        max_str_len=size,
        max_array_len=longest,
        max_map_len=longest,
        **hooks,
    )


def unpack_bounded(
    data: Buffer,
    *,
    allow_bytes: bool,
    max_bytes: int,
    what: str,
    max_memory: int | None = None,
    max_items: int = 0,
) -> Any:
    """Decode one msgpack value under memoryd's rules.

    Args:
        data: The encoded bytes (bytes, bytearray or memoryview).
        allow_bytes: binary data may appear.
        max_bytes: The largest input to accept.
        what: What ``data`` is, for error messages ("event record", "stored value").
        max_memory: The most bytes of Python objects the decoded value may take
            (estimated as it is built), or None for no limit beyond the input's length.
        max_items: With ``max_memory``: arrays and maps may hold this many elements
            even where the input's length (one element per 64 bytes) allows fewer.

    Returns:
        The value, with arrays as lists and maps as dicts.

    Raises:
        CorruptRecord: The bytes are empty, too large, not one valid msgpack value, or
            hold ext types, binary data where not allowed or a str that is not UTF-8,
            or would take more than ``max_memory`` bytes decoded.
        TypeError: ``data`` is not a bytes-like object.
    """
    if type(data) is bytes:
        size = len(data)
    elif isinstance(data, bytes | bytearray | memoryview):
        size = memoryview(data).nbytes
    else:
        raise TypeError(f"{what} must be bytes, got {type(data).__name__}")
    if size > max_bytes:
        raise CorruptRecord(f"{what} is {size} bytes; the limit is {max_bytes}")
    if size == 0:
        raise CorruptRecord(f"{what} is empty; the stored bytes are damaged")
    try:
        return _unpackb(
            data,
            size,
            allow_bytes=allow_bytes,
            what=what,
            max_memory=max_memory,
            max_items=max_items,
        )
    except _RefusedExt as exc:
        raise CorruptRecord(
            f"{what} holds msgpack ext type {exc.code}; memoryd never writes ext types"
        ) from None
    except msgpack.ExtraData as exc:
        raise CorruptRecord(f"{what} has trailing bytes after the record") from exc
    except msgpack.StackError as exc:
        raise CorruptRecord(f"{what} nests too deeply to decode") from exc
    except msgpack.FormatError as exc:
        raise CorruptRecord(f"{what} is not valid msgpack") from exc
    except UnicodeDecodeError as exc:
        raise CorruptRecord(f"{what} holds a str that is not valid UTF-8") from exc
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        reason = str(exc) or type(exc).__name__
        if "max_ext_len" in reason:
            reason = "it holds a msgpack ext type, which memoryd never writes"
        elif "incomplete input" in reason:
            reason = "it is truncated"
        elif "max_array_len" in reason or "max_map_len" in reason:
            reason = (
                f"it holds too many small values for its size (an array or map of {reason}; "
                "split the write)"
            )
        elif "max_bin_len" in reason:
            reason = "it holds binary data where only JSON values belong"
        raise CorruptRecord(f"{what} cannot be decoded: {reason}") from exc


def unpack_value(data: Buffer, *, max_bytes: int = MAX_VALUE_BYTES) -> Any:
    """Decode a value written by `pack_value`.

    Args:
        data: The encoded bytes (bytes, bytearray or memoryview).
        max_bytes: The largest encoding to accept.

    Returns:
        The value, with arrays as lists and maps as dicts.

    Raises:
        CorruptRecord: The bytes are garbage, truncated, too large or hold ext types.
        TypeError: ``data`` is not a bytes-like object.
    """
    return unpack_bounded(data, allow_bytes=True, max_bytes=max_bytes, what="stored value")


def unpack_wire(
    data: Buffer,
    *,
    max_bytes: int = MAX_WIRE_BYTES,
    max_memory: int | None = None,
    max_items: int = 0,
) -> Any:
    """Decode an ``application/msgpack`` network body, bounded like every unpack here.

    Args:
        data: The body bytes.
        max_bytes: The largest body to accept.
        max_memory: The most bytes of Python objects the decoded body may take, or None.
        max_items: With ``max_memory``: the most elements an array or map may hold
            whatever the body's length (a route's own limit, e.g. messages per add).

    Returns:
        The value: lists, dicts with str keys, str, int, float, bool, None.

    Raises:
        CorruptRecord: The bytes are not one valid msgpack value of JSON-compatible
            types (garbage, truncated, trailing bytes, binary data, ext types, too large,
            over ``max_memory`` once decoded).
        TypeError: ``data`` is not a bytes-like object.
    """
    if max_memory is None and type(data) is bytes and 0 < len(data) <= max_bytes:
        # `unpack_bounded`'s decode without its checks of the input's type and length,
        # done here (an answer per call on the client); any failure is decoded again
        # there, for its error
        try:
            return _unpackb(data, len(data), allow_bytes=False)
        except Exception:  # the same decode below raises its error
            pass
    return unpack_bounded(
        data,
        allow_bytes=False,
        max_bytes=max_bytes,
        what="msgpack body",
        max_memory=max_memory,
        max_items=max_items,
    )


# --------------------------------------------------------------------------- still-encoded arrays
#
# A read whose answer is stored values sent on as msgpack (the daemon's last-N read)
# need not decode and encode them again: the array's elements are copied as they are.

_ARRAY_HEADS = {0xDC: 3, 0xDD: 5}
"""The header length of array16 and array32; a fixarray's header is its one byte."""


def _array_head(data: Buffer, at: int) -> tuple[int, int]:
    """``(header length, element count)`` of the msgpack array starting at ``at``."""
    first = data[at]
    if 0x90 <= first <= 0x9F:
        return 1, first & 0x0F
    size = _ARRAY_HEADS.get(first)
    if size is None:
        raise ValueError("not an array")
    return size, int.from_bytes(data[at + 1 : at + size], "big")


def _corrupt_as(what: str, exc: Exception) -> CorruptRecord:
    if isinstance(exc, msgpack.OutOfData):
        return CorruptRecord(f"{what} cannot be decoded: it is truncated")
    reason = str(exc) or type(exc).__name__
    return CorruptRecord(f"{what} cannot be decoded: {reason}")


def unpack_map_holding_packed(
    data: bytes, field: str, *, what: str
) -> tuple[dict[str, Any], int, bytes]:
    """Decode a msgpack map except the array under ``field``, which stays encoded.

    The other fields are decoded under the bounded rules (str keys, no ext types, no
    binary data, lengths capped by the input); the array is skipped over, not decoded.

    Args:
        data: the encoded map (the whole input: trailing bytes are refused).
        field: the key of the array to keep encoded.
        what: what ``data`` is, for error messages.

    Returns:
        ``(the other fields, the array's length, its elements back to back)``; the
        length is 0 and the elements empty when the map has no ``field``.

    Raises:
        CorruptRecord: not one valid map, ``field`` not an array, or a refused value.
    """
    size = len(data)
    unpacker = msgpack.Unpacker(
        max_buffer_size=max(size, 1),
        raw=False,
        strict_map_key=True,
        ext_hook=_refuse_ext,
        max_ext_len=0,
        max_bin_len=0,
        max_str_len=size,
        max_array_len=size,
        max_map_len=size,
    )
    fields: dict[str, Any] = {}
    count, elements = 0, b""
    try:
        unpacker.feed(data)
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if type(key) is not str:
                raise CorruptRecord(f"{what} cannot be decoded: a map key is not a str")
            if key == field:
                start = unpacker.tell()
                unpacker.skip()
                head, count = _array_head(data, start)
                elements = data[start + head : unpacker.tell()]
            else:
                fields[key] = unpacker.unpack()
        if unpacker.tell() != size:
            raise CorruptRecord(f"{what} has trailing bytes after the record")
    except CorruptRecord:
        raise
    except _RefusedExt as exc:
        raise CorruptRecord(
            f"{what} holds msgpack ext type {exc.code}; memoryd never writes ext types"
        ) from None
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        raise _corrupt_as(what, exc) from None
    return fields, count, elements


def split_packed(elements: bytes, count: int, *, what: str) -> list[bytes]:
    """The ``count`` msgpack values of ``elements`` (back to back), each still encoded.

    Raises:
        CorruptRecord: ``elements`` does not hold exactly ``count`` values.
    """
    unpacker = msgpack.Unpacker(max_buffer_size=max(len(elements), 1))
    out: list[bytes] = []
    start = 0
    try:
        unpacker.feed(elements)
        for _ in range(count):
            unpacker.skip()
            end = unpacker.tell()
            out.append(elements[start:end])
            start = end
    except (ValueError, msgpack.UnpackException) as exc:
        raise _corrupt_as(what, exc) from None
    if start != len(elements):
        raise CorruptRecord(f"{what} holds more values than its array says")
    return out


_HEADS = msgpack.Packer(autoreset=True)


def pack_packed_array_map(field: str, count: int, chunks: list[bytes]) -> bytes:
    """``{field: [...]}`` encoded, from an array's ``count`` elements still encoded.

    Args:
        field: the map's one key.
        count: how many values ``chunks`` hold together.
        chunks: encoded values, back to back in each chunk, in order.
    """
    return b"".join(
        (_HEADS.pack_map_header(1), _HEADS.pack(field), _HEADS.pack_array_header(count), *chunks)
    )

"""The Lua scripts of the Redis store, and the key layout they work on. Pure: no I/O.

Why Lua and not MULTI/WATCH: a write must check the write token, the idempotency
key, ``expected_version`` and the writer's view of the conversation, and only then
append. With WATCH that is a read round trip, then a MULTI/EXEC that fails
whenever anything else touched the keys, then a retry loop on the client: under
concurrent writers from many daemons most attempts fail and every attempt costs
two round trips. A script runs the checks and the append as one atomic step on
the server in one round trip, many scripts go in one pipeline (the group commit),
and Redis replicates and logs only the script's effects.

Key layout (``P`` is the store's prefix, ``H`` the conversation id's UTF-8 bytes
in hex, so that no id can break out of the ``{...}`` hash tag and every key of a
conversation lands in one Redis Cluster slot)::

    P:{H}:s    stream: one entry per event, id "<version>-0",
               fields k (kind), n (message count), e (the msgpack event)
    P:{H}:m    hash: v (version), f (first live version), n (messages now),
               t (token of the last write)
    P:{H}:i    hash: idempotency key -> version (kept for the conversation's life)
    P:{H}:w0   hash: write token -> version, for versions v with v // MAX_TOKENS even
               (every write's and import's token, recorded in the script that writes)
    P:{H}:w1   the same for odd ones (a hash is emptied when its turn comes again)
    P:{H}:y    sorted set: the live system messages (`memoryd.store.systems`), score
               the ordinal, member the codec's pack of [ordinal, message]; complete
               once the meta hash has y = 1 (a conversation written before the index
               existed has none until its next write fills it)
    {P}:feed   stream: the global change feed, id "<position>-0", fields c (H), v
    {P}:fed    hash: "#" -> last position; H -> last version fed; "id" -> the store's
               marker (`memoryd.store.redis.identity`)

memoryd's own bookkeeping (ids in `memoryd.store.requests.HIDDEN_PREFIX`: run journals,
instance leases) is never fed, since the change feed never shows it, and a clear of such
a conversation erases its keys (`ERASE`), as LMDB erases it from its file: a finished
run leaves no key behind.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "ERASE",
    "FEED",
    "HISTORY",
    "IMPORT",
    "IMPORT_STATE",
    "MAX_TOKENS",
    "PREFIX_PATTERN",
    "RESENT",
    "WRITE",
    "ConvKeys",
    "ScriptKeys",
    "check_prefix",
    "cid_of_hex",
    "conv_keys",
    "erase_keys",
    "feed_keys",
    "import_keys",
    "redact",
    "resent_keys",
    "scan_pattern",
    "system_key",
]

MAX_TOKENS = 256
"""Write tokens remembered per conversation: at least the last this many writes'
(at most twice as many); an older retry is no longer recognised (retries happen
within one call timeout, so this is ample)."""

PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def check_prefix(prefix: object) -> str:
    """The key prefix, checked: 1 to 64 of ``A-Z a-z 0-9 _ . : -``.

    Raises:
        ValueError: anything else (braces would break the hash tags, glob
            characters the SCAN patterns).
    """
    if not isinstance(prefix, str) or not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(
            f"prefix must be 1 to 64 characters from A-Z a-z 0-9 _ . : -, not {prefix!r}"
        )
    return prefix


class ConvKeys(tuple[str, str, str, str, str]):
    """The five keys of one conversation: stream, meta, idem, two token generations."""

    __slots__ = ()

    @property
    def stream(self) -> str:
        """The event stream."""
        return self[0]

    @property
    def meta(self) -> str:
        """The metadata hash."""
        return self[1]


def conv_keys(prefix: str, cid: str) -> ConvKeys:
    """The keys of conversation ``cid`` (already validated) under ``prefix``."""
    tag = f"{prefix}:{{{cid.encode('utf-8').hex()}}}"
    return ConvKeys((f"{tag}:s", f"{tag}:m", f"{tag}:i", f"{tag}:w0", f"{tag}:w1"))


def system_key(prefix: str, cid: str) -> str:
    """The key of conversation ``cid``'s system-message index (in its slot)."""
    return f"{prefix}:{{{cid.encode('utf-8').hex()}}}:y"


def import_keys(prefix: str, cid: str, *, cluster: bool) -> tuple[str, ...]:
    """The keys `IMPORT` writes for ``cid``: stream, meta, idem, the two token
    generations [, feed stream, feed state], system index.

    On a Cluster the feed is in a slot of its own and is written after the commit.
    """
    keys = conv_keys(prefix, cid)
    head = tuple(keys) if cluster else (*keys, *feed_keys(prefix))
    return (*head, system_key(prefix, cid))


def erase_keys(prefix: str, cid: str) -> tuple[str, ...]:
    """The keys `ERASE` deletes for ``cid``: the five of `conv_keys`, the system index."""
    return (*conv_keys(prefix, cid), system_key(prefix, cid))


def resent_keys(prefix: str, cid: str) -> tuple[str, str, str]:
    """The keys `RESENT` reads for ``cid``: stream and the two token generations."""
    keys = conv_keys(prefix, cid)
    return keys[0], keys[3], keys[4]


def feed_keys(prefix: str) -> tuple[str, str]:
    """The change feed's stream and state hash (one slot of their own)."""
    return f"{{{prefix}}}:feed", f"{{{prefix}}}:fed"


class ScriptKeys:
    """The `WRITE` script's keys per conversation and the id in hex, cached (they are
    built for every write; the cache is emptied when it holds ``size``): the five of
    `conv_keys` [, the feed's two], the system index last.

    Args:
        prefix: the store's key prefix.
        cluster: on a Cluster the change feed's keys are not the script's (they live
            in another slot and are written after the commit).
    """

    def __init__(self, prefix: str, *, cluster: bool, size: int = 1 << 14) -> None:
        self.feed_stream, self.feed_state = feed_keys(prefix)
        self._prefix = prefix
        self._cluster = cluster
        self._size = size
        self._cache: dict[str, tuple[tuple[str, ...], str]] = {}

    def __call__(self, cid: str) -> tuple[tuple[str, ...], str]:
        found = self._cache.get(cid)
        if found is None:
            keys: tuple[str, ...] = conv_keys(self._prefix, cid)
            if not self._cluster:
                keys += (self.feed_stream, self.feed_state)
            keys += (system_key(self._prefix, cid),)
            if len(self._cache) >= self._size:
                self._cache.clear()
            found = self._cache[cid] = (keys, cid.encode("utf-8").hex())
        return found


def scan_pattern(prefix: str, cid_prefix: str) -> str:
    """The SCAN MATCH pattern of the metadata keys of ids starting with ``cid_prefix``."""
    return f"{prefix}:{{{cid_prefix.encode('utf-8').hex()}*}}:m"


def cid_of_hex(key: str | bytes) -> str | None:
    """The conversation id of a metadata key, or None if the key is not one."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start or not text.endswith("}:m"):
        return None
    try:
        return bytes.fromhex(text[start + 1 : end]).decode("utf-8")
    except ValueError:
        return None


def redact(url: str) -> str:
    """``url`` without its password, for logs and stats."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


_SEEN_FUNCTION = """
local function seen(stream, tokens0, tokens1, token, kind)
  local done = redis.call('HGET', tokens0, token) or redis.call('HGET', tokens1, token)
  if not done then return nil end
  if kind == 'popped' then
    local entry = redis.call('XRANGE', stream, done .. '-0', done .. '-0')
    if #entry == 1 then return {'dup', tonumber(done), entry[1][2][6]} end
  end
  return {'dup', tonumber(done)}
end
"""

_FEED_FUNCTION = """
local function feed(stream, state, hex, ver, low)
  local fed = tonumber(redis.call('HGET', state, hex)) or 0
  if fed >= ver then return end
  for v = math.max(fed + 1, low), ver do
    local pos = redis.call('HINCRBY', state, '#', 1)
    redis.call('XADD', stream, pos .. '-0', 'c', hex, 'v', v)
  end
  redis.call('HSET', state, hex, ver)
end
"""

WRITE = (
    _SEEN_FUNCTION
    + """
-- KEYS: stream, meta, idem, tokens (two generations) [, feed stream, feed state],
--       system index (the last key; used only when there is an ARGV 15)
-- ARGV: 1 token, 2 idempotency key or '', 3 expected version or '', 4 base version,
--       5 token of the write this one follows in the same pipeline or '',
--       6 message count after the write, 7 '1' to delete the stream first (clear),
--       8 kind, 9 messages in the event, 10 the encoded event, 11 '1' to feed,
--       12 the id in hex, 13 tokens per generation,
--       14 '1' when an earlier send of this token may have been applied (a resend)
--       [, 15 drop system index ordinals from ('' drops none),
--       16.. (ordinal, entry) pairs to add]
local token, idem = ARGV[1], ARGV[2]
if idem ~= '' then
  local done = redis.call('HGET', KEYS[3], idem)
  if done then return {'dup', tonumber(done)} end
end
local meta = redis.call('HMGET', KEYS[2], 'v', 'f', 'n', 't')
local cur = tonumber(meta[1]) or 0
local moved = tonumber(ARGV[4]) ~= cur or (ARGV[5] ~= '' and ARGV[5] ~= meta[4])
if moved or ARGV[14] == '1' then
  -- A token is fresh on its first send, so only a resend (which a re-planned write
  -- tells with ARGV[14]) or a write whose view is out of date can find it stored.
  local done = seen(KEYS[1], KEYS[4], KEYS[5], token, ARGV[8])
  if done then return done end
end
if moved then
  if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= cur then return {'conflict', cur} end
  return {'stale', cur, tonumber(meta[2]) or 1, tonumber(meta[3]) or 0}
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= cur then return {'conflict', cur} end
local ver = cur + 1
local first = tonumber(meta[2]) or 1
if ARGV[7] == '1' then
  redis.call('DEL', KEYS[1])
  first = ver
end
redis.call('XADD', KEYS[1], ver .. '-0', 'k', ARGV[8], 'n', ARGV[9], 'e', ARGV[10])
redis.call('HSET', KEYS[2], 'v', ver, 'f', first, 'n', ARGV[6], 't', token)
if idem ~= '' then redis.call('HSET', KEYS[3], idem, ver) end
local keep = tonumber(ARGV[13])
local tokens = KEYS[4 + math.floor(ver / keep) % 2]
if ver % keep == 0 then redis.call('DEL', tokens) end
redis.call('HSET', tokens, token, ver)
if ARGV[11] == '1' then
  local pos = redis.call('HINCRBY', KEYS[7], '#', 1)
  redis.call('XADD', KEYS[6], pos .. '-0', 'c', ARGV[12], 'v', ver)
end
if #ARGV >= 15 then
  -- the system index, KEYS[#KEYS]: ARGV 15 drop ordinals from ('' drops none),
  -- 16.. (ordinal, entry) pairs to add
  local index = KEYS[#KEYS]
  if ARGV[15] ~= '' then redis.call('ZREMRANGEBYSCORE', index, ARGV[15], '+inf') end
  for i = 16, #ARGV, 2 do redis.call('ZADD', index, ARGV[i], ARGV[i + 1]) end
  redis.call('HSET', KEYS[2], 'y', 1)
end
return {'ok', ver}
"""
)
"""Append one event if the writer's view is current; see the ARGV list in the script.

Returns ``{'ok', version}``, ``{'dup', version}`` (the token or idempotency key was
seen; a pop's token adds the popped event, see `RESENT`), ``{'conflict', current}``
or ``{'stale', current, first, count}`` (the view was out of date: nothing written,
plan again). The system-message index (the last key) changes in the same script as
the event, and is marked complete.

The write tokens live in two hashes used in turn, ``MAX_TOKENS`` versions each; a
hash is emptied when its turn comes again, so the last ``MAX_TOKENS`` writes (and up
to twice as many) are remembered at the cost of one ``HSET`` per write. On a single
server the change feed is written here too: one ``HINCRBY`` and one ``XADD``, since
nothing else ever feeds there (a Cluster feeds with `FEED` after the commit).
"""

FEED = (
    _FEED_FUNCTION
    + """
-- KEYS: feed stream, feed state.
-- ARGV: the id in hex, its version [, the lowest version to feed (older ones are deleted)].
feed(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or 1)
return 1
"""
)
"""Feed every version of one conversation not fed yet, in order (Redis Cluster only).

An import passes its first live version as the lowest: the versions below it were
deleted by a clear (``tail`` would skip them), and a log imported from a cleared
marker at version 1,000,000 must not feed a million empty positions.
"""

ERASE = """
-- KEYS: the conversation's stream, meta, idem, tokens (two generations), system index.
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {'ok', 0}
"""
"""Remove a bookkeeping conversation (a finished run's journal): every key of it, in one
atomic step; its id then reads as never written (version 0). See `erase_keys`."""

IMPORT_STATE = """
-- KEYS: stream, meta.  ARGV: 1 lowest version, 2 highest version.
-- Returns {version, first live version, message count, event, event, ...}: the
-- conversation's metadata and its stored events from ARGV[1] up to ARGV[2] and the
-- version, oldest first (payloads only; the ids are in them), read in one atomic step.
local meta = redis.call('HMGET', KEYS[2], 'v', 'f', 'n')
local cur = tonumber(meta[1]) or 0
local out = {cur, tonumber(meta[2]) or 1, tonumber(meta[3]) or 0}
local high = math.min(tonumber(ARGV[2]), cur)
if tonumber(ARGV[1]) > high then return out end
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1] .. '-0', high .. '-0')) do
  out[#out + 1] = entry[2][6]
end
return out
"""
"""What an import is planned from: the metadata and the stored events it overlaps."""

IMPORT = (
    _SEEN_FUNCTION
    + """
-- KEYS: stream, meta, idem, tokens (two generations) [, feed stream, feed state],
--       system index
-- ARGV: 1 token, 2 base version, 3 first live version after, 4 message count after,
--       5 '1' to feed, 6 the id in hex, 7 tokens per generation,
--       8 drop index ordinals from ('' drops none), 9 the number n of index entries
--       to add, then n (ordinal, entry) pairs,
--       then 5 per event, oldest first: version, kind, message count, encoded event,
--       idempotency key or ''
local done = seen(KEYS[1], KEYS[4], KEYS[5], ARGV[1], 'import')
if done then return done end
local cur = tonumber(redis.call('HGET', KEYS[2], 'v')) or 0
if tonumber(ARGV[2]) ~= cur then
  local meta = redis.call('HMGET', KEYS[2], 'f', 'n')
  return {'stale', cur, tonumber(meta[1]) or 1, tonumber(meta[2]) or 0}
end
local index = KEYS[#KEYS]
if ARGV[8] ~= '' then redis.call('ZREMRANGEBYSCORE', index, ARGV[8], '+inf') end
local entries_end = 9 + 2 * tonumber(ARGV[9])
for i = 10, entries_end, 2 do redis.call('ZADD', index, ARGV[i], ARGV[i + 1]) end
local ver = cur
for i = entries_end + 1, #ARGV, 5 do
  ver = tonumber(ARGV[i])
  if ARGV[i + 1] == 'cleared' then redis.call('DEL', KEYS[1]) end
  redis.call('XADD', KEYS[1], ver .. '-0', 'k', ARGV[i + 1], 'n', ARGV[i + 2], 'e', ARGV[i + 3])
  if ARGV[i + 4] ~= '' then redis.call('HSET', KEYS[3], ARGV[i + 4], ver) end
  if ARGV[5] == '1' then
    local pos = redis.call('HINCRBY', KEYS[7], '#', 1)
    redis.call('XADD', KEYS[6], pos .. '-0', 'c', ARGV[6], 'v', ver)
  end
end
redis.call('HSET', KEYS[2], 'v', ver, 'f', ARGV[3], 'n', ARGV[4], 't', ARGV[1], 'y', 1)
local keep = tonumber(ARGV[7])
local turn = math.floor(ver / keep)
local tokens = KEYS[4 + turn % 2]
if turn ~= math.floor(cur / keep) then redis.call('DEL', tokens) end
redis.call('HSET', tokens, ARGV[1], ver)
return {'ok', ver}
"""
)
"""Write an import's new events verbatim if the conversation is still at the base version.

The events were checked against `IMPORT_STATE` by the store's actor (identical
overlap, continuing the log; see `importing.to_write`); the script only checks
that nothing was written since, then appends every event as the writes do: a
``cleared`` event deletes the stream before it, each event's idempotency key is
recorded, the system-message index is updated, and on a single server each event
gets its change feed position. All
of it runs as one script, so the import is written whole or not at all: its only
check comes before its first write, what follows cannot fail on a store's own keys
(a script that has written is not stopped for memory), and Redis logs and
replicates a script's effects as one ``MULTI``/``EXEC`` once it ends.

Returns ``{'ok', last version}``, ``{'dup', last version}`` (its token is stored:
an earlier send was applied) or ``{'stale', current, first, count}`` (something
was written since the plan: nothing written, plan again). The import's token is
kept as the last write's (``t``) and among the write tokens, under its last version
(the generation it lands in is emptied first when the import enters a new one, as a
write does).
"""

RESENT = (
    _SEEN_FUNCTION
    + """
-- KEYS: stream, tokens (two generations).  ARGV: 1 token, 2 kind of the write.
-- Returns {} if the token is not stored, else what the write's own send answered
-- when it found its token: {'dup', version [, the popped event for a pop]}.
return seen(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]) or {}
"""
)
"""Whether a write whose earlier send may have been applied was: read-only, before the
write is planned again (a pop's planning would read the message after the one it
popped, a fork's would find its target filled, a clear's an empty conversation).
"""

HISTORY = """
-- KEYS: stream [, meta, system index].  ARGV: 1 version to read at or '' for the newest,
-- 2 limit or -1, 3 '1' to add the system index.
-- Returns {current, first, kind1, event1, kind2, event2, ...}, newest first: the
-- events the reverse walk needs (a popped entry comes without its payload); with
-- ARGV 3, then {message count, index entries} of the current version, or 0 when the
-- conversation has no complete index.
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #newest == 0 then return {0, 0} end
local cur = tonumber(string.match(newest[1][1], '^(%d+)'))
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local first = tonumber(string.match(oldest[1][1], '^(%d+)'))
local upto = cur
if ARGV[1] ~= '' then upto = tonumber(ARGV[1]) end
local out = {cur, first}
local limit = tonumber(ARGV[2])
local skip, got, start = 0, 0, upto .. '-0'
while upto <= cur and upto >= first and limit ~= 0 do
  local batch = redis.call('XREVRANGE', KEYS[1], start, '-', 'COUNT', 64)
  local stop = false
  for _, entry in ipairs(batch) do
    local f = entry[2]
    local kind, n = f[2], tonumber(f[4])
    if kind == 'popped' then
      skip = skip + 1
      out[#out + 1] = kind
      out[#out + 1] = ''
    elseif kind == 'cleared' then
      stop = true
      break
    elseif kind == 'appended' or kind == 'forked' then
      out[#out + 1] = kind
      out[#out + 1] = f[6]
      local used = math.min(skip, n)
      skip = skip - used
      got = got + n - used
      if kind == 'forked' or (limit >= 0 and got >= limit) then
        stop = true
        break
      end
    end
  end
  if stop or #batch < 64 then break end
  start = '(' .. batch[#batch][1]
end
if ARGV[3] == '1' then
  local meta = redis.call('HMGET', KEYS[2], 'n', 'y')
  if meta[2] then
    out[#out + 1] = {tonumber(meta[1]) or 0, redis.call('ZRANGE', KEYS[3], 0, -1)}
  else
    out[#out + 1] = 0
  end
end
return out
"""
"""Read the events a history needs, newest first, in one atomic step (O(limit)); with
the system index, the system messages come from the same step: one snapshot."""

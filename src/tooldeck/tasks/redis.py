"""``RedisTaskStore``: the ``TaskStore`` in Redis or Valkey, shared by every process of a fleet.

Keys, after the engine's prefix (``tooldeck:`` unless told):

    task:<id>               a hash: the record's fields (``_CODEC``), a field that is None left out; numbers as text
                            that reads back to the same float; result, error and arguments as JSON text; and
                            ``expires_at`` (created_at + ttl, as SQLite keeps it), what expiry compares
    task-owner[:<owner>]    the owner's tasks (``task-owner`` alone: the unbound ones), scored by created_at; members
                            of one score sort by id, so the set's own order is ``list``'s (created_at, task_id)
    task-active[:<owner>]   the owner's held tasks (``HELD``), scored by expires_at (+inf: none): ``count_active``
    task-lease              every held task, scored by lease_until (-inf: no lease, so first): ``expired``
    task-expiry             every task with a ttl, scored by expires_at: ``purge_expired``

Each operation is one Lua script, one round trip; Redis runs a script alone, so each is atomic whatever the other
processes do, as each SQLite statement is. The move table writes the scripts' conditions: ``MOVES`` and ``HELD`` in
the Lua are generated from record.py (``can_move``, ``HELD``), so an ``update`` applies exactly where SQLite's
``UPDATE ... WHERE status IN (...)`` does, and a ``take_over`` is one compare-and-swap on holder + attempt + lease.
The indexes are a function of the record: every script that writes a record ends with ``index(id)``, which puts the
task in exactly the indexes its fields call for, and ``drop(id)`` takes a task out of all of them with its record.

Time is the caller's (``now``), as in SQLite: Redis expires no task key by itself (its clock is not the callers').
An expired task is gone for every method at once, deleted by ``purge_expired`` (the task manager runs it every
minute) or on the way by ``get`` and ``update``. The scripts find records through the indexes, so one store's keys
live on one server (a primary and its replicas; not a Redis Cluster).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import orjson

from ..engine.connection import Engine
from ..protocol.errors import TaskStoreError, UnknownCursorError
from .record import HELD, STATUSES, TaskRecord, can_move
from .store import check_new, check_status

_BATCH = 100  # index entries a script reads at a time while it walks an index; tasks purge_expired deletes per script


def _table(names: Any) -> str:
    return "{" + "".join(f"['{name}'] = true, " for name in names) + "}"


# What every script shares. KEYS[1]: task-lease, KEYS[2]: task-expiry (KEYS[3]: the one key the script is about);
# ARGV[1..3]: the bases of the record keys ("<prefix>task:"), of the owner and of the active indexes. An optional
# argument is two: '1' and the value, or '0' and '' for None (``given``).
_SHARED = f"""
local RECORD, OWNER, ACTIVE = ARGV[1], ARGV[2], ARGV[3]
local HELD = {_table(HELD)}
local MOVES = {{{"".join(f"['{old}'] = {_table(s for s in STATUSES if can_move(old, s))}, " for old in STATUSES)}}}
local BATCH = {_BATCH}

local function owned(base, owner)
  if owner then return base .. ':' .. owner end
  return base
end

local function live(expires_at, now)
  return not expires_at or tonumber(expires_at) > now
end

local function given(i)
  if ARGV[i] == '1' then return ARGV[i + 1] end
  return false
end

local function put(key, field, value)
  if value then redis.call('HSET', key, field, value) else redis.call('HDEL', key, field) end
end

-- the task in exactly the indexes its record calls for
local function index(id)
  local f = redis.call('HMGET', RECORD .. id, 'owner', 'status', 'created_at', 'expires_at', 'lease_until')
  redis.call('ZADD', owned(OWNER, f[1]), f[3], id)
  if HELD[f[2]] then
    redis.call('ZADD', owned(ACTIVE, f[1]), f[4] or '+inf', id)
    redis.call('ZADD', KEYS[1], f[5] or '-inf', id)
  else
    redis.call('ZREM', owned(ACTIVE, f[1]), id)
    redis.call('ZREM', KEYS[1], id)
  end
  if f[4] then redis.call('ZADD', KEYS[2], f[4], id) end
end

-- the task deleted, and taken out of every index
local function drop(id)
  local owner = redis.call('HGET', RECORD .. id, 'owner')
  redis.call('DEL', RECORD .. id)
  redis.call('ZREM', owned(OWNER, owner), id)
  redis.call('ZREM', owned(ACTIVE, owner), id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
"""

# KEYS[3]: the record. ARGV[4]: the id; ARGV[5...]: its fields, name and value by turns. 0 if the id is taken.
_CREATE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('HSET', KEYS[3], unpack(ARGV, 5))
index(ARGV[4])
return 1
"""

# KEYS[3]: the record. ARGV[4]: the id, [5]: now. Its fields; nil if unknown, or expired (then it is deleted).
_GET = """
if not live(redis.call('HGET', KEYS[3], 'expires_at'), tonumber(ARGV[5])) then
  drop(ARGV[4])
  return false
end
local fields = redis.call('HGETALL', KEYS[3])
if #fields == 0 then return false end
return fields
"""

# KEYS[3]: the record. ARGV[4]: the id, [5]: now, [6]: the status, [7, 8]: the node (None: any), [9, 10]: the
# status message, [11, 12]: the result, [13, 14]: the error. The fields as they now stand; nil if unknown or expired.
# The condition is SQLite's WHERE: an allowed move, by the holder if one is named, and to the same status only with a
# message that differs.
_UPDATE = """
local key, id, now = KEYS[3], ARGV[4], tonumber(ARGV[5])
local f = redis.call('HMGET', key, 'status', 'status_message', 'node', 'expires_at')
if not f[1] then return false end
if not live(f[4], now) then
  drop(id)
  return false
end
local status, node, message = ARGV[6], given(7), given(9)
if MOVES[f[1]][status] and (not node or f[3] == node) and (f[1] ~= status or (message and message ~= f[2])) then
  redis.call('HSET', key, 'status', status, 'updated_at', ARGV[5])
  put(key, 'status_message', message)
  put(key, 'result', given(11))
  put(key, 'error', given(13))
  if not HELD[status] then redis.call('HDEL', key, 'arguments') end
  index(id)
end
return redis.call('HGETALL', key)
"""

# KEYS[3]: the owner's index. ARGV[4]: now, [5]: the limit, [6, 7]: the task to start after. The records of the
# page; nil when that task is not a live task of this owner.
_LIST = """
local now, limit, after, start = tonumber(ARGV[4]), tonumber(ARGV[5]), given(6), 0
if after then
  local rank = redis.call('ZRANK', KEYS[3], after)
  if not rank or not live(redis.call('HGET', RECORD .. after, 'expires_at'), now) then return false end
  start = rank + 1
end
local page = {}
while #page < limit do
  local ids = redis.call('ZRANGE', KEYS[3], start, start + BATCH - 1)
  for _, id in ipairs(ids) do
    if live(redis.call('HGET', RECORD .. id, 'expires_at'), now) then
      page[#page + 1] = redis.call('HGETALL', RECORD .. id)
      if #page == limit then break end
    end
  end
  if #ids < BATCH then break end
  start = start + BATCH
end
return page
"""

# ARGV[4]: the node, [5]: now, [6]: lease_until, [7...]: the task ids. The ids renewed: held by the node, live, held.
_RENEW = """
local node, now, renewed = ARGV[4], tonumber(ARGV[5]), {}
for i = 7, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', RECORD .. id, 'node', 'status', 'expires_at')
  if f[1] == node and HELD[f[2]] and live(f[3], now) then
    redis.call('HSET', RECORD .. id, 'lease_until', ARGV[6])
    index(id)
    renewed[#renewed + 1] = id
  end
end
return renewed
"""

# ARGV[4]: now, [5]: the limit. The records of up to limit live tasks whose lease ran out by now, oldest lease first
# (the lease index holds the held tasks only, so what it yields up to now is TaskRecord.lease_expired).
_EXPIRED = """
local now, limit, offset, found = tonumber(ARGV[4]), tonumber(ARGV[5]), 0, {}
while #found < limit do
  local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[4], 'BYSCORE', 'LIMIT', offset, BATCH)
  for _, id in ipairs(ids) do
    if live(redis.call('HGET', RECORD .. id, 'expires_at'), now) then
      found[#found + 1] = redis.call('HGETALL', RECORD .. id)
      if #found == limit then break end
    end
  end
  if #ids < BATCH then break end
  offset = offset + BATCH
end
return found
"""

# KEYS[3]: the record. ARGV[4]: the id, [5]: now, [6, 7]: the node seen, [8]: the attempt seen; what the task
# becomes: [9]: node, [10]: lease_until, [11]: status, [12]: attempts, [13, 14]: status message, [15, 16]: result.
# The compare-and-swap: only a live held task whose lease ran out, on the holder and the attempt seen. The fields as
# taken over; nil if not.
_TAKE_OVER = """
local key, id, now = KEYS[3], ARGV[4], tonumber(ARGV[5])
local f = redis.call('HMGET', key, 'status', 'node', 'attempts', 'lease_until', 'expires_at')
if not (HELD[f[1]] and live(f[5], now) and (not f[4] or tonumber(f[4]) <= now) and f[2] == given(6)
        and f[3] == ARGV[8]) then
  return false
end
redis.call('HSET', key, 'node', ARGV[9], 'lease_until', ARGV[10], 'updated_at', ARGV[5], 'status', ARGV[11],
           'attempts', ARGV[12])
put(key, 'status_message', given(13))
put(key, 'result', given(15))
redis.call('HDEL', key, 'error')
if not HELD[ARGV[11]] then redis.call('HDEL', key, 'arguments') end
index(id)
return redis.call('HGETALL', key)
"""

# ARGV[4]: now. Deletes up to BATCH tasks whose ttl ran out by now; how many.
_PURGE = """
local ids = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[4], 'BYSCORE', 'LIMIT', 0, BATCH)
for _, id in ipairs(ids) do drop(id) end
return #ids
"""


def _number(value: float) -> str:
    return repr(float(value))  # the shortest text that reads back to the same double, in Python and in Lua


def _json(value: Any) -> bytes:
    return orjson.dumps(value)


# Field -> (encode, decode). A field that is None is left out of the hash, so None needs no text of its own.
_CODEC: dict[str, tuple[Callable[[Any], str | bytes], Callable[[bytes], Any]]] = {
    "task_id": (str, bytes.decode),
    "owner": (str, bytes.decode),
    "status": (str, bytes.decode),
    "status_message": (str, bytes.decode),
    "created_at": (_number, float),
    "updated_at": (_number, float),
    "ttl_ms": (str, int),
    "poll_interval_ms": (str, int),
    "tool": (str, bytes.decode),
    "result": (_json, orjson.loads),
    "error": (_json, orjson.loads),
    "node": (str, bytes.decode),
    "lease_until": (_number, float),
    "attempts": (str, int),
    "arguments": (_json, orjson.loads),
}
_DECODE = {name.encode(): (name, decode) for name, (_, decode) in _CODEC.items()}


def _hash(record: TaskRecord) -> list[str | bytes]:
    """The record as the hash's fields, name and value by turns (with ``expires_at``, what expiry compares)."""
    fields: list[str | bytes] = []
    for name, (encode, _) in _CODEC.items():
        value = getattr(record, name)
        if value is not None:
            fields += [name, encode(value)]
    if record.expires_at is not None:
        fields += ["expires_at", _number(record.expires_at)]
    return fields


def _record(fields: list[bytes]) -> TaskRecord:
    values = {}
    for i in range(0, len(fields), 2):
        known = _DECODE.get(fields[i])
        if known is not None:  # expires_at is derived: not a field of the record
            values[known[0]] = known[1](fields[i + 1])
    return TaskRecord(**values)


def _optional(value: str | bytes | None) -> list[str | bytes]:
    return ["0", ""] if value is None else ["1", value]


def _optional_json(value: Any) -> list[str | bytes]:
    return _optional(None if value is None else orjson.dumps(value))


class RedisTaskStore:
    """Tasks in Redis, shared by the processes whose engines reach one server (see the module docstring). Each
    method is one round trip (``purge_expired``: one per hundred tasks it deletes); a server that cannot be reached
    is ``BackendUnavailableError``. ``close`` leaves the engine open: the other seams share it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._indexes = [engine.key("task-lease"), engine.key("task-expiry")]
        self._owner_base = engine.key("task-owner")
        self._active_base = engine.key("task-active")
        self._bases = [engine.key("task", ""), self._owner_base, self._active_base]
        self._create = engine.script(_SHARED + _CREATE)
        self._get = engine.script(_SHARED + _GET)
        self._update = engine.script(_SHARED + _UPDATE)
        self._list = engine.script(_SHARED + _LIST)
        self._renew = engine.script(_SHARED + _RENEW)
        self._expired = engine.script(_SHARED + _EXPIRED)
        self._take_over = engine.script(_SHARED + _TAKE_OVER)
        self._purge = engine.script(_SHARED + _PURGE)
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisTaskStore({self.engine.name})"

    async def create(self, record: TaskRecord) -> None:
        self._check_open()
        check_new(record)
        created = await self._create(self._keys(record.task_id), [*self._bases, record.task_id, *_hash(record)])
        if not created:
            raise ValueError(f"task {record.task_id} already exists")

    async def get(self, task_id: str, now: float) -> TaskRecord | None:
        self._check_open()
        fields = await self._get(self._keys(task_id), [*self._bases, task_id, _number(now)])
        return None if fields is None else _record(fields)

    async def update(
        self,
        task_id: str,
        *,
        status: str,
        now: float,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        node: str | None = None,
    ) -> TaskRecord | None:
        self._check_open()
        check_status(status)
        args = [*self._bases, task_id, _number(now), status, *_optional(node), *_optional(status_message),
                *_optional_json(result), *_optional_json(error)]  # fmt: skip
        fields = await self._update(self._keys(task_id), args)
        return None if fields is None else _record(fields)

    async def list(
        self, owner: str | None, now: float, after: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRecord]:
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        keys = [*self._indexes, _owned(self._owner_base, owner)]
        page = await self._list(keys, [*self._bases, _number(now), limit, *_optional(after)])
        if page is None:
            raise UnknownCursorError()
        return [_record(fields) for fields in page]

    async def count_active(self, owner: str | None, now: float) -> int:
        self._check_open()
        with self.engine.reaching():  # one command: the index holds the held tasks, scored by when they expire
            count = await self.engine.client.zcount(_owned(self._active_base, owner), f"({_number(now)}", "+inf")
        return int(count)

    async def purge_expired(self, now: float) -> int:
        self._check_open()
        purged = 0
        while True:  # in batches, so no one script keeps the server from the other clients for long
            batch = int(await self._purge(self._indexes, [*self._bases, _number(now)]))
            purged += batch
            if batch < _BATCH:
                return purged

    async def renew(
        self, node: str, task_ids: builtins.list[str], now: float, lease_until: float
    ) -> builtins.list[str]:
        self._check_open()
        if not task_ids:
            return []
        asked = list(dict.fromkeys(task_ids))  # each id once, as SQLite's IN (...) has it
        renewed = await self._renew(self._indexes, [*self._bases, node, _number(now), _number(lease_until), *asked])
        return [task_id.decode() for task_id in renewed]

    async def expired(self, now: float, limit: int = 100) -> builtins.list[TaskRecord]:
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        found = await self._expired(self._indexes, [*self._bases, _number(now), limit])
        return [_record(fields) for fields in found]

    async def take_over(
        self, seen: TaskRecord, *, node: str, now: float, lease_until: float, failure: str | None = None
    ) -> TaskRecord | None:
        self._check_open()
        taken = seen.taken_over(node, now, lease_until, failure)  # what the task becomes, if the script lets it
        args = [*self._bases, seen.task_id, _number(now), *_optional(seen.node), str(seen.attempts), node,
                _number(lease_until), taken.status, str(taken.attempts), *_optional(failure),
                *_optional_json(taken.result)]  # fmt: skip
        fields = await self._take_over(self._keys(seen.task_id), args)
        return None if fields is None else _record(fields)

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise TaskStoreError(f"the task store {self.engine.name} is closed")

    def _keys(self, task_id: str) -> builtins.list[str]:
        return [*self._indexes, self.engine.key("task", task_id)]


def _owned(base: str, owner: str | None) -> str:
    """The key of ``owner``'s index under ``base``: ``base`` alone for the unbound tasks, which no owner's key is."""
    return base if owner is None else f"{base}:{owner}"

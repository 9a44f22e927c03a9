"""The engine: shared state in Redis or Valkey for a fleet of tooldeck processes, through the maintained ``redis``
client (``pip install 'tooldeck[redis]'``).

``connection.Engine`` is one process's connection (``Engine.from_url("redis://host:6379/0")``), shared by the
seams' Redis implementations (``server/state_redis.py``, ``bus_redis.py``, ``events_redis.py``,
``security/limits_redis.py``); they are built from the primitives here, each atomic and one round trip:

- ``values.JsonValues``     JSON values by name with an optional time to live, and a count of the live ones
- ``bucket.TokenBuckets``   token buckets, taken from together or not at all (a Lua script)
- ``spent.SpentMarks``      names spent once fleet-wide (``SET NX PX``)
- ``log.NumberedLogs``      numbered, capped logs: what SSE resumption replays
- ``hub.Hub``               publish/subscribe: one subscriber connection per process, fanned out to its subscribers

Every key and channel starts with the engine's prefix ("tooldeck:" unless told), so decks can share one server.
Every payload is JSON (orjson). A server that cannot be reached is ``BackendUnavailableError`` (``errors.py``).

This package is the one place that imports ``redis``, and only its modules other than this one and ``errors`` do:
a deck that configures no shared backend never loads the client.
"""

from .errors import BackendUnavailableError

__all__ = ["BackendUnavailableError"]

"""A deck whose state lives in the Redis that $TOOLDECK_TEST_REDIS names (tasks in $TOOLDECK_TEST_TASKS, a SQLite
file), for `tooldeck serve --http --workers N`: its one tool says which process answered."""

import os

from tooldeck import Deck
from tooldeck.engine.connection import Engine
from tooldeck.security.keys_redis import RedisKeyRing
from tooldeck.security.limits_redis import RedisRateLimiter
from tooldeck.security.spent_redis import RedisSpentStore
from tooldeck.server.backends import Backends
from tooldeck.server.bus_redis import RedisBus
from tooldeck.server.events_redis import RedisEventStore
from tooldeck.server.state_redis import RedisSessionStore

engine = Engine.from_url(os.environ["TOOLDECK_TEST_REDIS"])
shared = Backends(sessions=RedisSessionStore(engine), bus=RedisBus(engine), events=RedisEventStore(engine),
                  limiter=RedisRateLimiter(engine), spent=RedisSpentStore(engine), keys=RedisKeyRing(engine),
                  tasks=f"sqlite:{os.environ['TOOLDECK_TEST_TASKS']}", engine=engine, shared=True)  # fmt: skip
deck = Deck("workers", backends=shared)


@deck.tool
def whoami() -> str:
    """The process that answered: its pid and its node id."""
    return f"{os.getpid()} {deck.node_id}"

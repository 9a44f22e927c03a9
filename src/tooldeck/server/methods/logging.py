"""logging/setLevel (spec: server/utilities/logging): the lowest level the client wants as notifications/message."""

from __future__ import annotations

from typing import Any

from ...protocol.errors import InvalidParamsError
from ..options import LOG_LEVELS, LOG_RANK
from ..request import RequestContext


def set_level(rctx: RequestContext) -> dict[str, Any]:
    level = rctx.params.get("level")
    if type(level) is not str or level not in LOG_RANK:
        raise InvalidParamsError(f"Invalid params: unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    rctx.state.log_rank = LOG_RANK[level]
    rctx.state.changed()
    return {}

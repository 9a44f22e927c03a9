"""The one error of the engine: the shared backend cannot be reached. It imports nothing of ``redis``, so code that
only needs to recognise the error (a transport answering 503) can name it without loading the client."""

from __future__ import annotations

import math

from ..protocol.errors import RefusedError

RETRY_AFTER = 1.0  # seconds: the engine reconnects by itself, and a few seconds is what a Redis restart takes


class BackendUnavailableError(RefusedError):
    """Shared state (Redis or Valkey) cannot be reached now: a request that needs it is refused with -32000 and,
    over HTTP, 503 with ``Retry-After``. The message is one line naming the server (never its password) and the
    cause, as in ``the shared backend redis://10.0.0.5:6379/0 is unreachable: Connection refused``."""

    def __init__(self, message: str, retry_after: float = RETRY_AFTER) -> None:
        headers = [(b"retry-after", str(max(1, math.ceil(retry_after))).encode())]
        super().__init__(message, {"tooldeck/retryAfter": retry_after}, http_status=503, headers=headers)
        self.retry_after = retry_after

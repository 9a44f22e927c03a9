"""Test a deck in-process, from plain pytest: ``from tooldeck.testing import Client``.

    def test_add():
        with Client(deck) as client:                 # blocking methods: no async runner or plugin needed
            assert client.call_tool("add", {"a": 1, "b": 2}).data == 3

    async def test_add_async():                      # under an async test runner
        async with Client(deck) as client:           # the same methods, awaitable, on the test's own loop
            assert (await client.call_tool("add", {"a": 1, "b": 2})).data == 3

The client is a real MCP session: every message crosses as encoded JSON (``transports.memory``), so the deck is
tested exactly as a host would see it. Not imported by ``import tooldeck``.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..protocol import versions
from ..server.elicitation import ElicitResult
from .results import (
    Completion,
    Elicitation,
    LogMessage,
    Progress,
    PromptResult,
    RequestError,
    ResourceResult,
    SamplingRequest,
    TaskInfo,
    ToolCallError,
    ToolResult,
)
from .session import LOCAL, AsyncClient, ElicitationHandler, Options, SamplingHandler
from .sync import SyncClient

if TYPE_CHECKING:
    from ..deck import Deck

__all__ = [
    "AsyncClient",
    "Client",
    "Completion",
    "ElicitResult",
    "Elicitation",
    "LogMessage",
    "Progress",
    "PromptResult",
    "RequestError",
    "ResourceResult",
    "SamplingRequest",
    "SyncClient",
    "TaskInfo",
    "ToolCallError",
    "ToolResult",
]


class Client:
    """An in-process MCP client for ``deck``: ``with Client(deck) as client`` gives a ``SyncClient`` (blocking
    methods, for plain tests); ``async with Client(deck) as client`` gives an ``AsyncClient`` (awaitable methods).

    - ``elicitation``: answers the deck's ``ctx.elicit`` — ``callback(Elicitation)`` returns the content dict
      (accept), ``"decline"``, ``"cancel"`` or an ``ElicitResult``; given, the client declares the capability.
    - ``sampling``: answers ``ctx.sample`` — ``callback(SamplingRequest)`` returns the reply's text or a
      CreateMessageResult dict. Either callback may be sync or async, and may raise ``RequestError(code, message)``
      to refuse; any other exception it raises is raised in the test by the call that caused it.
    - ``principal``: who the session is (a ``tooldeck.security.principal.Principal``, or what your policies read);
      by default the deck's local principal, as on stdio; None for an anonymous session.
    - ``log_level``: sent as ``logging/setLevel`` after the handshake (the deck's own default otherwise).
    - ``protocol_version``, ``capabilities`` (merged into what the client declares), ``timeout`` (seconds each
      request may take before it is cancelled and ``TimeoutError`` is raised).
    """

    def __init__(
        self,
        deck: Deck,
        *,
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
        principal: Any = LOCAL,
        log_level: str | None = None,
        protocol_version: str = versions.LATEST,
        capabilities: dict[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.deck = deck
        self.options = Options(elicitation, sampling, principal, log_level, protocol_version, capabilities, timeout)
        self._sync: SyncClient | None = None
        self._async: AsyncClient | None = None

    def __enter__(self) -> SyncClient:
        if self._sync is not None or self._async is not None:
            raise RuntimeError("this Client is already open: make a new Client(deck) for another session")
        client = SyncClient(self.deck, self.options)
        client.start()
        self._sync = client
        return client

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        client, self._sync = self._sync, None
        if client is None:
            return
        try:
            client.close()
        except RuntimeError:
            if error is None:  # the test's own exception says more
                raise

    async def __aenter__(self) -> AsyncClient:
        if self._sync is not None or self._async is not None:
            raise RuntimeError("this Client is already open: make a new Client(deck) for another session")
        self._async = AsyncClient(self.deck, self.options)
        try:
            await self._async.start()
        except BaseException:
            await self._async.aclose()
            self._async = None
            raise
        return self._async

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        client, self._async = self._async, None
        if client is not None:
            await client.aclose()

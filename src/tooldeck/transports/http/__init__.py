"""The Streamable HTTP transport: an ASGI app (``HttpApp``) assembled from layers (guard, authentication, routes, the
MCP endpoint), its session registry, channels and SSE writer, the event store, and serving under uvicorn."""

from ...server.events import EventStore, MemoryEventStore
from .app import HttpApp
from .auth import AuthenticationBackend

__all__ = ["AuthenticationBackend", "EventStore", "HttpApp", "MemoryEventStore"]

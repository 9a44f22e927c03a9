"""The Streamable HTTP transport: an ASGI app (``HttpApp``) assembled from layers (guard, authentication, routes, the
MCP endpoint), its session registry, channels and SSE writer, the event store, and serving under uvicorn."""

from .app import HttpApp
from .auth import AuthenticationBackend
from .events import EventStore, MemoryEventStore

__all__ = ["AuthenticationBackend", "EventStore", "HttpApp", "MemoryEventStore"]

"""The Streamable HTTP transport: an ASGI app (``HttpApp``), its sessions and channels, the event store, uvicorn."""

from .app import HttpApp
from .events import EventStore, MemoryEventStore

__all__ = ["EventStore", "HttpApp", "MemoryEventStore"]

"""tooldeck: publish Python functions as Model Context Protocol tools — spec-complete, fast, safe by default.

from tooldeck import Deck

deck = Deck("calculator")

@deck.tool
def add(a: float, b: float) -> float:
    "Add two numbers."
    return a + b

deck.run()
"""

from typing import Any

from .deck import Deck
from .model.content import Annotations, Audio, EmbeddedResource, Image, ResourceLink, Text
from .protocol.errors import (
    ClientRequestError,
    ProtocolError,
    RegistrationError,
    SchemaError,
    TooldeckError,
    ToolError,
    UrlElicitationRequiredError,
)
from .server.context import Context

__version__ = "0.1.0"
_LAZY = {"ElicitResult": ".server.elicitation", "Message": ".prompts.messages"}  # loaded when first asked for

__all__ = [
    "Annotations",
    "Audio",
    "ClientRequestError",
    "Context",
    "Deck",
    "ElicitResult",
    "EmbeddedResource",
    "Image",
    "Message",
    "ProtocolError",
    "RegistrationError",
    "ResourceLink",
    "SchemaError",
    "Text",
    "ToolError",
    "TooldeckError",
    "UrlElicitationRequiredError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tooldeck' has no attribute {name!r}")

"""tooldeck: publish Python functions as Model Context Protocol tools — spec-complete, fast, safe by default.

from tooldeck import Deck

deck = Deck("calculator")

@deck.tool
def add(a: float, b: float) -> float:
    "Add two numbers."
    return a + b

deck.run()
"""

from .prompts.messages import Message
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
from .server.deck import Deck
from .server.requests import ElicitResult
from .tools.content import Annotations, Audio, EmbeddedResource, Image, ResourceLink, Text

__version__ = "0.1.0"

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

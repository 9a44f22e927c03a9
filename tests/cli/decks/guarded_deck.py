"""A deck for the client commands' refusals: a tool that needs a confirmation (level 9), one that needs a scope
(level 5) and one anyone may call. ``stdio_user`` is the same deck under a policy whose local user has no scopes."""

from tooldeck import Deck
from tooldeck.security.policy import Policy

deck = Deck("guarded-deck", version="1.0.0")


@deck.tool(security_level=9)
def launch(target: str) -> str:
    """Needs the user's confirmation on every call."""
    return f"launched {target}"


@deck.tool(security_level=5, scopes=["deploy:write"])
def deploy(service: str) -> str:
    """Needs the deploy:write scope."""
    return f"deployed {service}"


@deck.tool
def hello() -> str:
    """Anyone may call it."""
    return "hi"


def stdio_user() -> Deck:
    deck.apply_policy(Policy({"authentication": {"stdio": {"subject": "me", "scopes": []}}}))
    return deck

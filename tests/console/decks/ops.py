"""The deck the browser tests serve: a level-10 tool an approver must approve (four eyes), a level-9 tool its caller
approves in a browser (URL mode), a plain one, and a tool definition served at two versions (to roll back)."""

from tooldeck import Deck

deck = Deck("ops")


@deck.tool(security_level=10, version="1.0.0", scopes=["deploy"])
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


@deck.tool(security_level=9, version="2.0.0")
def purge(cache: str) -> str:
    """Purge a cache."""
    return f"purged {cache}"


@deck.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


def _greet(version: str, description: str) -> dict:
    return {"id": "greet", "name": "Greet", "version": version, "description": description, "capabilities": [
        {"name": "hello", "description": description, "parameters": [
            {"name": "who", "type": "string", "required": True, "description": "who to greet"}]}]}  # fmt: skip


deck.manager.implements("greet.hello")(lambda who: f"hello {who}")
deck.manager.register(_greet("1.0.0", "Say hello"))
deck.manager.register(_greet("1.0.1", "Say hello warmly"))

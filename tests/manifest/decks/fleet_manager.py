"""A deck for real processes sharing one Redis (tests/manifest/test_fleet_processes.py): one tool definition, and
two Python tools that change it through the manager, as an operator's admin tools would."""

from typing import Any

from tooldeck import Deck

deck = Deck("fleet-manager")


def calc(version: str, *capabilities: str) -> dict[str, Any]:
    return {
        "id": "calculator",
        "name": "Calculator",
        "version": version,
        "description": "Arithmetic",
        "capabilities": [
            {"name": name, "description": f"Does {name}", "parameters": [{"name": "x", "type": "number"}]}
            for name in capabilities
        ],
    }


@deck.implements("calculator")
def calculator(capability: str, x: float = 0) -> str:
    return f"{capability}({x})"


deck.manager.register(calc("1.0.0", "add", "subtract"))


@deck.tool
async def upgrade() -> str:
    """Serve calculator 1.1.0 (it adds multiply), fleet-wide."""
    return str(await deck.manager.aupgrade(calc("1.1.0", "add", "subtract", "multiply")))


@deck.tool
async def rollback() -> str:
    """Serve the calculator version served before, fleet-wide."""
    return str(await deck.manager.arollback("calculator"))

"""A deck that plants a schema violation at import: every JSON-RPC result carries a member no revision defines.

Only the negative test of the stdio driver serves it (``tests/test_mcp_schema.py``); the check must fail.
"""

from tooldeck import Deck
from tooldeck.protocol import jsonrpc

_result = jsonrpc.result


def _planted_result(request_id, result):  # type: ignore[no-untyped-def]
    return {**_result(request_id, result), "planted": True}


jsonrpc.result = _planted_result  # the session calls jsonrpc.result(...) through the module

deck = Deck("planted", version="0.0.1")


@deck.tool
def add(a: int, b: int) -> int:
    return a + b

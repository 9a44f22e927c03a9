"""Decisions on approvals between the processes of a fleet (security/approvals.py): a call waits for a person's
decision in the process that runs it, while the decision may be made on any process — the console's, or the one a
browser's approval page reached.

The deciding process checks who decides, takes the approval out of the shared store (once, fleet-wide), then asks the
waiting process, over the bus (``nodes.py``), to settle it: ``approval/decide`` with ``{"id", "binding", "approved",
"by", "reason"}``, answered with whether the call was still waiting there for that binding. A process that does not
answer within the time-out (it died: its call with it) is reported to the decider, never retried.
"""

from __future__ import annotations

import functools
from typing import Any

from ..protocol.errors import InvalidParamsError
from ..security.approvals import Approvals, ApprovalStore, Decision
from .nodes import Nodes, NodeUnreachableError

DECIDE = "approval/decide"


def approvals_over(store: ApprovalStore, node: str, nodes: Nodes | None) -> Approvals:
    """This process's ``Approvals`` over the backends' ``store``; with ``nodes`` (shared backends), a decision made
    here reaches a call waiting in another process, and one made elsewhere reaches the calls waiting here."""
    if nodes is None:
        return Approvals(store, node)
    approvals = Approvals(store, node, relay=functools.partial(_relay, nodes))
    nodes.serve(DECIDE, functools.partial(_settle, approvals))
    return approvals


async def _relay(nodes: Nodes, node: str, approval_id: str, binding: tuple[str, str, str], decision: Decision
                 ) -> bool | None:  # fmt: skip
    args = {"id": approval_id, "binding": list(binding), "approved": decision.approved, "by": decision.by,
            "reason": decision.reason}  # fmt: skip
    try:
        return (await nodes.ask(node, DECIDE, args)) is True
    except NodeUnreachableError:
        return None


def _settle(approvals: Approvals, args: Any) -> bool:
    """``approval/decide`` as the waiting process answers it."""
    binding = args.get("binding") if type(args) is dict else None
    if (type(binding) is not list or len(binding) != 3 or not all(type(part) is str for part in binding)
            or type(args.get("id")) is not str or type(args.get("approved")) is not bool
            or type(args.get("by")) is not str or type(args.get("reason")) is not str):  # fmt: skip
        raise InvalidParamsError(f"{DECIDE}: expected id, binding, approved, by and reason")
    decision = Decision(args["approved"], args["by"], args["reason"])
    return approvals.settle(args["id"], (binding[0], binding[1], binding[2]), decision)

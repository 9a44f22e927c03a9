"""OpenTelemetry spans following the semantic conventions for MCP servers (``tooldeck serve --tracing``;
``deck.use_tracing(provider)``), through the OpenTelemetry API (the optional extra ``tooldeck[tracing]``), imported
only when tracing is on: a deck without it pays one flag check per request.

Each request gets a SERVER span named ``{mcp.method.name} {target}`` (the tool or prompt name, if any), parented on
the W3C ``traceparent`` (and ``tracestate``, ``baggage``) in its ``params._meta``, with ``mcp.method.name``,
``mcp.protocol.version``, ``mcp.session.id`` (2025 sessions only: a 2026-07-28 request has none),
``jsonrpc.request.id``, ``gen_ai.tool.name`` and ``gen_ai.operation.name`` ``execute_tool`` (tools/call),
``gen_ai.prompt.name`` (prompts/get), ``mcp.resource.uri`` (resources/read), ``network.transport`` (``pipe``,
``tcp``) and ``network.protocol.name`` (``http``); on failure ``error.type`` (the JSON-RPC code, or ``tool_error``
for an ``isError`` result), ``rpc.response.status_code`` and the status ERROR with the error's message.

The request's work runs with its span current (``runner.py``), so a tool's own spans and its HTTP client's spans
nest under it — sync tools too (they run in a copy of the context). The pipeline records its decisions on the span:
``tooldeck.security.level`` and ``tooldeck.decision`` (``allowed`` or ``refused``, with ``tooldeck.refusal.reason``),
and JSON log lines name the span's trace (``trace_id``, logs.py).
"""

from __future__ import annotations

from typing import Any

active = False  # whether some deck traces (the runner looks before it makes a span current)
_api: Any = None  # opentelemetry.trace and opentelemetry.context, once a deck traces: (trace, context)


class Tracing:
    """The tracer of one deck and what it puts on spans."""

    def __init__(self, provider: Any = None) -> None:
        from opentelemetry import context, trace
        from opentelemetry.propagate import extract

        global active, _api
        self._trace = trace
        self._extract = extract
        self._attach, self._detach, self._in_context = context.attach, context.detach, trace.set_span_in_context
        self.tracer = trace.get_tracer("tooldeck", tracer_provider=provider)
        _api = (trace, context)
        active = True

    def start(self, method: str, request_id: Any, params: Any, revision: str | None, session: str | None,
              transport: str) -> Any:  # fmt: skip
        """The SERVER span of a request, started (not current)."""
        params = params if type(params) is dict else {}
        meta = params.get("_meta")
        parent = self._extract(meta) if type(meta) is dict and "traceparent" in meta else None
        name = params.get("name")
        name = name if type(name) is str else None
        attributes: dict[str, Any] = {"mcp.method.name": method, "network.transport": transport}
        if transport == "tcp":
            attributes["network.protocol.name"] = "http"
        if revision:
            attributes["mcp.protocol.version"] = revision
        if session is not None:
            attributes["mcp.session.id"] = session
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)
        target = None
        if method == "tools/call" and name:
            target = attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and name:
            target = attributes["gen_ai.prompt.name"] = name
        elif method == "resources/read" and type(params.get("uri")) is str:
            attributes["mcp.resource.uri"] = params["uri"]
        return self.tracer.start_span(f"{method} {target}" if target else method, context=parent,
                                      kind=self._trace.SpanKind.SERVER, attributes=attributes)  # fmt: skip

    def finish(self, span: Any, message: dict[str, Any] | None) -> None:
        """End ``span`` with the answer ``message`` (None: cancelled, no answer)."""
        if message is not None:
            error = message.get("error")
            if error is not None:
                code = str(error.get("code", ""))
                span.set_attribute("error.type", code)
                span.set_attribute("rpc.response.status_code", code)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error.get("message", ""))))
            else:
                result = message.get("result")
                if type(result) is dict and result.get("isError"):
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _first_text(result)))
        span.end()

    def traced(self, reply: Any, span: Any) -> Traced:
        return Traced(self, reply, span)

    def current(self, span: Any) -> Any:
        """Make ``span`` current (in this task, and what it starts): the token ``detach`` takes."""
        return self._attach(self._in_context(span))

    def detach(self, token: Any) -> None:
        self._detach(token)


class Traced:
    """A request's reply that ends its span with the answer."""

    __slots__ = ("_reply", "_tracing", "drop", "span")

    def __init__(self, tracing: Tracing, reply: Any, span: Any) -> None:
        self._tracing = tracing
        self._reply = reply
        self.span = span
        self.drop = self._dropped

    def __call__(self, message: dict[str, Any]) -> None:
        if self.span is not None:
            self._tracing.finish(self.span, message)
            self.span = None
        self._reply(message)

    def _dropped(self) -> None:
        if self.span is not None:
            self.span.set_attribute("tooldeck.cancelled", True)
            self._tracing.finish(self.span, None)
            self.span = None
        drop = getattr(self._reply, "drop", None)
        if drop is not None:
            drop()


def decision(refusal: BaseException | None, level: int | None, reason: str | None = None) -> None:
    """Record the pipeline's decision on the current span (a call's security level; refused, and why)."""
    span = _api[0].get_current_span()
    if not span.is_recording():
        return
    if refusal is None:
        span.set_attributes({"tooldeck.decision": "allowed"} if level is None else
                            {"tooldeck.security.level": level, "tooldeck.decision": "allowed"})  # fmt: skip
        return
    found: dict[str, Any] = {"tooldeck.decision": "refused", "tooldeck.refusal.reason": reason or str(refusal)}
    if level is not None:
        found["tooldeck.security.level"] = level
    span.set_attributes(found)


def trace_id() -> str | None:
    """The current span's trace id (32 hex digits), if a span is current."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or ():
        if type(block) is dict and block.get("type") == "text":
            return str(block.get("text", ""))
    return "tool error"

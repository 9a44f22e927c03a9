"""Prometheus metrics of one process (``tooldeck serve --http --metrics``; ``deck.use_metrics()``), through the
maintained ``prometheus-client`` (the optional extra ``tooldeck[metrics]``), imported only when metrics are on:
a deck without them pays one ``None`` check per request.

The two histograms of the OpenTelemetry semantic conventions for MCP servers, with their bucket boundaries:

- ``mcp_server_operation_duration_seconds`` — each request, from its dispatch to its answer; labels
  ``mcp_method_name``, ``gen_ai_tool_name`` (tools/call) or ``gen_ai_prompt_name`` (prompts/get), ``error_type``
  (the JSON-RPC code as a string; ``tool_error`` for a result with ``isError``; empty on success),
  ``mcp_protocol_version``, ``network_transport`` (``pipe`` for stdio, ``tcp`` for HTTP);
- ``mcp_server_session_duration_seconds`` — each 2025 session this process served, from its start to its end.

And what an operator of this server reads: ``tooldeck_refusals_total`` by ``reason`` (``unauthenticated``,
``forbidden``, ``rate_limited``, ``unavailable``, ``invalid``) and security ``level``;
``tooldeck_rate_limited_calls_total``; ``tooldeck_tasks_total`` by the ``status`` a task moved to;
``tooldeck_audit_records_total`` and ``tooldeck_audit_write_errors_total``; ``tooldeck_requests_in_flight``;
``tooldeck_sessions`` (live, this process); ``tooldeck_sse_streams_open``; ``tooldeck_tool_info`` (1 per tool
served, with its ``version`` and ``level``); with a shared backend, ``tooldeck_backend_command_duration_seconds``
(each command to Redis, sent to answered) and ``tooldeck_bus_delivery_seconds`` (each bus message of another
process, from its publication to its arrival here, by the two processes' wall clocks). Each process of a fleet exposes its own: sum them in PromQL.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

# mcp.server.operation.duration's explicit bucket boundaries (semantic conventions for MCP), in seconds.
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BACKEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
SESSION_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0)
_OPERATION_LABELS = ("mcp_method_name", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type", "mcp_protocol_version",
                     "network_transport")  # fmt: skip
_REASONS = {401: "unauthenticated", 403: "forbidden", 429: "rate_limited", 503: "unavailable"}


class Metrics:
    """The metrics of one deck (one process), in a registry of their own (``registry``)."""

    def __init__(self, server: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.operation = LeanHistogram("mcp_server_operation_duration_seconds", "MCP requests, dispatch to answer",
                                       _OPERATION_LABELS, OPERATION_BUCKETS)  # fmt: skip
        registry.register(self.operation)
        self.session = Histogram("mcp_server_session_duration_seconds", "MCP sessions this process served",
                                 ("mcp_protocol_version", "network_transport"), buckets=SESSION_BUCKETS,
                                 registry=registry)  # fmt: skip
        self.refusals = Counter("tooldeck_refusals", "Calls and requests refused, by reason and security level",
                                ("reason", "level"), registry=registry)  # fmt: skip
        self.rate_limited = Counter("tooldeck_rate_limited_calls", "Calls refused by a rate limit", registry=registry)
        self.tasks = Counter("tooldeck_tasks", "Tasks moved to a status (working when created)", ("status",),
                             registry=registry)  # fmt: skip
        self.audit_records = Counter("tooldeck_audit_records", "Audit records written", registry=registry)
        self.audit_errors = Counter("tooldeck_audit_write_errors", "Audit records that could not be written",
                                    registry=registry)  # fmt: skip
        self.in_flight = 0  # requests dispatched and not yet answered: read at each scrape
        Gauge("tooldeck_requests_in_flight", "Requests dispatched and not yet answered", registry=registry
              ).set_function(lambda: self.in_flight)  # fmt: skip
        self.sse_streams = Gauge("tooldeck_sse_streams_open", "SSE streams open on this process", registry=registry)
        self.backend = Histogram("tooldeck_backend_command_duration_seconds", "Commands to the shared backend "
                                 "(Redis), sent to answered", buckets=BACKEND_BUCKETS, registry=registry)  # fmt: skip
        self.bus = Histogram("tooldeck_bus_delivery_seconds", "Bus messages from other processes, published to "
                             "received (wall clocks)", buckets=BACKEND_BUCKETS, registry=registry)  # fmt: skip
        self._sessions: list[Callable[[], int]] = []
        Gauge("tooldeck_sessions", "Live sessions of this process", registry=registry).set_function(
            lambda: sum(count() for count in self._sessions)
        )
        self.server = server
        if server is not None:
            registry.register(_ToolInfo(server))

    def watch(self, backends: Any) -> None:
        """Time the commands of ``backends``' shared engine (none without one, or over TLS: the client's pool), and
        the delivery of what other processes publish on its bus."""
        engine = getattr(backends, "engine", None)
        wire = getattr(engine, "wire", None)
        if wire is not None:
            wire.watch(self.backend.observe)
        if engine is not None:
            engine.observe_bus = self.bus.observe

    def count_sessions(self, count: Callable[[], int]) -> None:
        """Have ``tooldeck_sessions`` add ``count()`` (a transport's live sessions) at each scrape."""
        self._sessions.append(count)

    def timed(self, reply: Any, method: str, params: dict[str, Any], revision: str | None, transport: str) -> Timed:
        """``reply`` (where a request's answer goes), observing the request's duration when it is called."""
        return Timed(self, reply, method, params, revision, transport)

    def refused(self, refusal: BaseException, level: int | None) -> None:
        status: Any = getattr(refusal, "http_status", None) or getattr(refusal, "status", 403)  # Refused-, HttpError
        reason = _REASONS.get(status, "invalid" if status == 400 else "forbidden")
        if type(refusal).__name__ in ("RateLimitedError", "RateLimitRefusedError"):
            reason = "rate_limited"
        if reason == "rate_limited":
            self.rate_limited.inc()
        self.refusals.labels(reason, "" if level is None else str(level)).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text a scrape gets, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Timed:
    """A request's reply that observes its duration and outcome once, and counts it in flight meanwhile."""

    __slots__ = ("_labels", "_metrics", "_reply", "_started", "drop")

    def __init__(self, metrics: Metrics, reply: Any, method: str, params: dict[str, Any], revision: str | None,
                 transport: str) -> None:  # fmt: skip
        name = params.get("name") if type(params) is dict else None
        name = name if type(name) is str else ""
        tool = name if method == "tools/call" else ""
        prompt = name if method == "prompts/get" else ""
        self._labels = (method, tool, prompt, revision or "", transport)
        self._metrics = metrics
        self._reply = reply
        self._started = time.monotonic()
        self.drop = self._dropped
        metrics.in_flight += 1

    def __call__(self, message: dict[str, Any]) -> None:
        if self._metrics is not None:
            error = message.get("error")
            if error is not None:
                error_type = str(error.get("code", ""))
            else:
                result = message.get("result")
                error_type = "tool_error" if type(result) is dict and result.get("isError") else ""
            method, tool, prompt, revision, transport = self._labels
            if method == "initialize" and error is None:  # the revision is the one the answer chose
                revision = str((message.get("result") or {}).get("protocolVersion") or "")
            self._metrics.operation.observe((method, tool, prompt, error_type, revision, transport),
                                            time.monotonic() - self._started)  # fmt: skip
            self._done()
        self._reply(message)

    def _dropped(self) -> None:
        """Cancelled: no answer, nothing observed."""
        if self._metrics is not None:
            self._done()
        drop = getattr(self._reply, "drop", None)
        if drop is not None:
            drop()

    def _done(self) -> None:
        self._metrics.in_flight -= 1
        self._metrics = None  # type: ignore[assignment]


class LeanHistogram:
    """A labelled histogram observed at the cost of a bisect and two additions, collected as prometheus-client's
    own histogram family at each scrape (its ``Histogram`` takes a lock per bucket and per sum on every observation,
    and looks its labels up by keyword; a request's answer is observed on the event loop's thread, one at a time).
    """

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self.bounds = buckets
        self.series: dict[tuple[str, ...], list[float]] = {}  # labels -> counts per bucket (+Inf last), then the sum

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        counts = self.series.get(labels)
        if counts is None:
            counts = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        counts[bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        edges = [floatToGoString(bound) for bound in self.bounds] + ["+Inf"]
        for labels, counts in list(self.series.items()):
            running, buckets = 0.0, []
            for edge, count in zip(edges, counts, strict=False):
                running += count
                buckets.append((edge, running))
            family.add_metric(list(labels), buckets, counts[-1])
        yield family

    def describe(self) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily

        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labels)


class _ToolInfo:
    """``tooldeck_tool_info``: the tools the process serves now, read at each scrape."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily("tooldeck_tool_info", "Tools served, with their version and security level",
                                   labels=("tool", "version", "level"))  # fmt: skip
        for tool in self.server.tools:
            level = getattr(tool, "security_level", None)
            family.add_metric((tool.name, getattr(tool, "version", None) or "", "" if level is None else str(level)), 1)
        yield family

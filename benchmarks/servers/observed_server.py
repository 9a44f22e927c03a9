"""tooldeck_server.py's deck with Prometheus metrics and OpenTelemetry spans on (the SDK, a span processor that
hands each span to an exporter which drops it): what observability costs a served call (observe_micro.py).

Run with `tooldeck serve benchmarks/servers/observed_server.py --http`.
"""

import importlib.util
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

_spec = importlib.util.spec_from_file_location("bench_tooldeck_server", Path(__file__).with_name("tooldeck_server.py"))
_module = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(_module)  # type: ignore[union-attr]


class Dropped(SpanExporter):
    def export(self, spans: object) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Dropped()))
deck = _module.deck
deck.use_metrics()
deck.use_tracing(provider)

"""server.py's Python SDK server with OpenTelemetry's SDK installed: the SDK's own server spans
(its OpenTelemetryMiddleware, on by default) are written as JSON lines to the file SPANS_FILE
names. `--http PORT` serves Streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio."""

import json
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class FileExporter(SpanExporter):
    def __init__(self, path):
        self.path = path

    def export(self, spans):
        with open(self.path, "a") as out:
            for span in spans:
                out.write(json.dumps({
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": format(span.context.trace_id, "032x"),
                    "span_id": format(span.context.span_id, "016x"),
                    "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
                }) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["SPANS_FILE"])))
trace.set_tracer_provider(provider)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server import server  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

"""The benchmark harness: a raw JSON-RPC client over stdio, the measurements, and the report."""

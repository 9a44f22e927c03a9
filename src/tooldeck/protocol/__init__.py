"""JSON-RPC 2.0 envelopes, error codes, protocol versions, cursors and the JSON codec: pure, no I/O, no asyncio."""

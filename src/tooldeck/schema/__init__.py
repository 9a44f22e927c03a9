"""Python types -> JSON Schema 2020-12, compiled validators, and validation messages with JSON paths."""

"""Tool definitions (seed 002): the file format and its JSON Schema, loading and the registration rules, the mapping
of each capability to an MCP tool, handlers, semantic-version rules, and the tool manager that serves them live.

Nothing here is imported until a definition is loaded, compared or watched, or a shared definitions store
(store.py, the seam ``server/backends.py`` names) is configured.
"""

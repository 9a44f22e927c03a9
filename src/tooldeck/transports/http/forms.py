"""The HTML forms of tooldeck's own pages (the approval page, the operator console): an urlencoded body, read whole
up to a limit."""

from __future__ import annotations

from urllib.parse import parse_qs

from .responses import Receive


async def read_form(receive: Receive, limit: int, fields: int) -> dict[str, str] | None:
    """An urlencoded form's fields (the first value of each name); None past ``limit`` bytes, and no fields at all
    when it has more than ``fields`` (no form of the page has)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body"):
            break
    try:
        found = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=fields)
    except ValueError:  # more fields than the form has
        return {}
    return {key: values[0] for key, values in found.items() if values}

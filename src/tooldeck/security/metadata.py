"""OAuth protected resource metadata (RFC 9728): the document, the ASGI app that serves it at
``/.well-known/oauth-protected-resource`` (and its path-inserted form), and the ``WWW-Authenticate`` challenges
(RFC 6750 §3) that point clients at it.

    resource = "https://mcp.example.com/mcp"
    document = protected_resource_metadata(resource, ["https://auth.example.com"], scopes_supported=["tools"])
    HttpApp(deck, auth=backend, routes=metadata_routes(document))
    # GET https://mcp.example.com/.well-known/oauth-protected-resource/mcp  (and .../oauth-protected-resource)
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

WELL_KNOWN = "/.well-known/oauth-protected-resource"

_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 §3.3 scope-token
_QUOTABLE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")  # what RFC 6750 §3 allows in error_description: not these
_ERRORS = ("invalid_request", "invalid_token", "insufficient_scope")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def protected_resource_metadata(
    resource: str,
    authorization_servers: Iterable[str],
    *,
    scopes_supported: Iterable[str] | None = None,
    bearer_methods_supported: Iterable[str] = ("header",),
    resource_name: str | None = None,
    resource_documentation: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The RFC 9728 §2 document for ``resource`` (this server's canonical URI, e.g. ``https://host/mcp``).

    MCP requires at least one authorization server (an issuer URL). Tokens go in the ``Authorization`` header only
    (never the query string or the body), hence ``bearer_methods_supported: ["header"]``. ``extra`` adds other
    RFC 9728 fields as given (``resource_policy_uri``, ``resource_signing_alg_values_supported``, ...).
    """
    check_resource(resource)
    servers = list(authorization_servers)
    if not servers:
        raise ValueError("protected resource metadata: MCP requires at least one authorization server")
    for server in servers:
        if urlsplit(server).scheme not in ("https", "http") or not urlsplit(server).netloc:
            raise ValueError(f"protected resource metadata: authorization server {server!r} is not an http(s) URL")
    document: dict[str, Any] = {"resource": resource, "authorization_servers": servers}
    if scopes_supported is not None:
        document["scopes_supported"] = [check_scope(s) for s in scopes_supported]
    document["bearer_methods_supported"] = list(bearer_methods_supported)
    if resource_name is not None:
        document["resource_name"] = resource_name
    if resource_documentation is not None:
        document["resource_documentation"] = resource_documentation
    document.update(extra)
    return document


def check_resource(resource: str) -> str:
    """A resource identifier as RFC 9728 §1.2 / RFC 8707 want it: an absolute http(s) URI with no fragment."""
    parts = urlsplit(resource)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError(f"resource {resource!r} is not an absolute http(s) URI")
    if parts.fragment or resource.endswith("#"):
        raise ValueError(f"resource {resource!r} has a fragment, which RFC 8707 forbids")
    if '"' in resource or "\\" in resource:
        raise ValueError(f"resource {resource!r} contains a quote or backslash")
    return resource


def metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` is (RFC 9728 §3.1: the well-known part goes between host and path):
    ``https://host/mcp`` -> ``https://host/.well-known/oauth-protected-resource/mcp``. Put it in the challenges."""
    parts = urlsplit(check_resource(resource))
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}{query}"


def metadata_paths(resource: str) -> list[str]:
    """The paths a client tries (MCP 2025-11-25): path-inserted first, then the root form."""
    path = urlsplit(check_resource(resource)).path.rstrip("/")
    return [WELL_KNOWN + path, WELL_KNOWN] if path else [WELL_KNOWN]


class ProtectedResourceMetadata:
    """An ASGI app serving one metadata document as JSON: GET and HEAD get 200, any other method 405.

    ``scopes``: a function giving ``scopes_supported`` as it is now (a server's tools, and the scopes they need,
    change while it serves); the document is encoded again only when its answer changes. Without it the document's
    own ``scopes_supported`` stands."""

    def __init__(self, document: dict[str, Any], scopes: Callable[[], Iterable[str]] | None = None) -> None:
        self.document = document
        self.scopes = scopes
        self._shown: tuple[str, ...] | None = None
        self.body = json.dumps(document, separators=(",", ":")).encode()

    def current(self) -> bytes:
        """The document's JSON with the scopes of the moment."""
        if self.scopes is not None:
            shown = tuple(sorted(set(self.scopes())))
            if shown != self._shown:
                document = {key: value for key, value in self.document.items() if key != "scopes_supported"}
                if shown:  # placed where the RFC lists it, after the authorization servers
                    document = _with_scopes(document, [check_scope(s) for s in shown])
                self.document, self._shown = document, shown
                self.body = json.dumps(document, separators=(",", ":")).encode()
        return self.body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            body = b'{"error":"method_not_allowed","error_description":"use GET"}'
            await _respond(send, 405, body, [(b"allow", b"GET, HEAD")])
            return
        body = self.current()
        await _respond(send, 200, b"" if method == "HEAD" else body, [], length=len(body))


def _with_scopes(document: dict[str, Any], scopes: list[str]) -> dict[str, Any]:
    ordered: dict[str, Any] = {}
    for key, value in document.items():
        ordered[key] = value
        if key == "authorization_servers":
            ordered["scopes_supported"] = scopes
    ordered.setdefault("scopes_supported", scopes)
    return ordered


def metadata_routes(document: dict[str, Any], scopes: Callable[[], Iterable[str]] | None = None) -> dict[str, Any]:
    """``HttpApp(..., routes=metadata_routes(document))``: the document at every path a client may try; ``scopes``
    keeps its ``scopes_supported`` current (see ``ProtectedResourceMetadata``)."""
    app = ProtectedResourceMetadata(document, scopes)
    return dict.fromkeys(metadata_paths(document["resource"]), app)


async def _respond(send: Send, status: int, body: bytes, headers: list[Any], length: int | None = None) -> None:
    size = str(len(body) if length is None else length).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", size), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def www_authenticate(
    resource_metadata_url: str | None,
    error: str | None = None,
    description: str | None = None,
    scope: Iterable[str] | str | None = None,
) -> str:
    """A ``WWW-Authenticate`` value (RFC 6750 §3, RFC 9728 §5.1), parameters in this order:

        Bearer resource_metadata="<url>"                                              no credentials (401)
        Bearer error="invalid_token", error_description="...", resource_metadata="..."  a bad token (401)
        Bearer error="insufficient_scope", scope="a b", resource_metadata="..."         step-up (403)

    The description is cut down to the characters RFC 6750 allows in it (no quotes, no backslashes, ASCII).
    """
    params = []
    if error is not None:
        if error not in _ERRORS:
            raise ValueError(f"WWW-Authenticate: unknown error code {error!r} (RFC 6750 §3.1 has {', '.join(_ERRORS)})")
        params.append(f'error="{error}"')
    if description is not None:
        params.append(f'error_description="{_QUOTABLE.sub("", description.replace(chr(34), chr(39)))}"')
    if scope is not None:
        scopes = scope.split() if isinstance(scope, str) else list(scope)
        params.append(f'scope="{" ".join(check_scope(s) for s in scopes)}"')
    if resource_metadata_url is not None:
        if '"' in resource_metadata_url or "\\" in resource_metadata_url:
            raise ValueError(f"WWW-Authenticate: {resource_metadata_url!r} contains a quote or backslash")
        params.append(f'resource_metadata="{resource_metadata_url}"')
    return "Bearer " + ", ".join(params) if params else "Bearer"


def check_scope(scope: str) -> str:
    if not _SCOPE_TOKEN.fullmatch(scope):
        raise ValueError(f"scope {scope!r} is not a scope-token (RFC 6749 §3.3: printable ASCII, no space or quote)")
    return scope

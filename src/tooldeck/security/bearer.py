"""Bearer credentials (RFC 6750 §2.1): taking the token out of a request's ``Authorization`` header, and the
401/400 refusals with their ``WWW-Authenticate`` challenges. The static-token and JWT backends share this.

The token is read from the header only. One in the query string (``?access_token=``) is refused, not used: MCP
forbids clients to send one there, and a URL ends up in logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from ..protocol.errors import INVALID_REQUEST, SERVER_ERROR, HttpError
from .metadata import WELL_KNOWN, www_authenticate
from .principal import Principal

HEADERS = "tooldeck.headers"  # the request headers as a dict, put in the scope by the HTTP Host/Origin guard
MAX_TOKEN_LENGTH = 16 * 1024  # longer is refused before any work is spent on it
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 §2.1


class BearerBackend:
    """An authentication backend for ``Authorization: Bearer <token>``; subclasses implement ``verify``.

    ``authenticate(scope)`` returns None when the request has no credentials (anonymous: the caller decides whether
    that is allowed), unless ``required``: then it refuses with 401 and a challenge. A malformed header or a token
    that ``verify`` rejects is always refused with 401 ``invalid_token``. ``public_paths`` (the RFC 9728 metadata by
    default) are never authenticated: a client must be able to read them before it has a token.
    ``resource_metadata`` is the URL of this server's RFC 9728 document, named in every challenge.
    """

    def __init__(
        self,
        *,
        resource_metadata: str | None = None,
        required: bool = False,
        public_paths: Iterable[str] = (WELL_KNOWN,),
    ) -> None:
        self.resource_metadata = resource_metadata
        self.required = required
        self.public_paths = tuple(p.rstrip("/") for p in public_paths)
        self._public_prefixes = tuple(p + "/" for p in self.public_paths)
        self.challenge = www_authenticate(resource_metadata)  # the 401 for a request with no credentials
        www_authenticate(resource_metadata, "invalid_token", "")  # a URL with a quote fails here, not per request

    def authenticate(self, scope: MutableMapping[str, Any]) -> Any:
        """The request's principal, None (anonymous), or an awaitable of either when the token must be verified;
        raises ``HttpError`` to refuse the request. A token verified before costs no await."""
        path = scope.get("path", "")
        if path in self.public_paths or path.startswith(self._public_prefixes):
            return None
        token = self.bearer_token(scope)
        if token is None:
            if self.required:
                raise HttpError(401, SERVER_ERROR, "Unauthorized: this server requires a bearer token",
                                [(b"www-authenticate", self.challenge.encode())])  # fmt: skip
            return None
        principal = self.cached(token)
        if principal is not None:
            return principal
        if not _B64TOKEN.fullmatch(token):
            raise self.invalid("the Authorization header is not 'Bearer <token>'")
        return self.verify(token)

    def cached(self, token: str) -> Principal | None:
        """The principal of a token verified before and still accepted, without verifying it again (None: verify
        it). Only a token that passed ``verify`` may be found here, so it passed the header's syntax check too."""
        return None

    async def verify(self, token: str) -> Principal:
        """The principal the token stands for, or raise ``self.invalid(...)``."""
        raise NotImplementedError

    def is_public(self, path: str) -> bool:
        return path in self.public_paths or path.startswith(self._public_prefixes)

    def bearer_token(self, scope: MutableMapping[str, Any]) -> str | None:
        """The request's bearer token; None if it has no ``Authorization`` header; raises if that is not one."""
        headers = scope.get(HEADERS)
        if headers is None:  # the backend is used without the guard that builds the dict
            headers = scope[HEADERS] = dict(scope.get("headers", ()))
        query = scope.get("query_string", b"")
        if query.startswith(b"access_token=") or b"&access_token=" in query:
            raise self.bad_request("the access token must be sent in the Authorization header, not the URL")
        raw = headers.get(b"authorization")
        if raw is None:
            return None
        raw_headers = scope.get("headers", ())
        if len(headers) < len(raw_headers) and sum(1 for name, _ in raw_headers if name == b"authorization") > 1:
            raise self.bad_request("the request has more than one Authorization header")  # (a name came twice)
        if raw[:7] == b"Bearer " and 7 < len(raw) <= MAX_TOKEN_LENGTH + 7 and raw.find(0x20, 7) < 0:
            return raw[7:].decode("latin-1")  # the usual form, in one piece (its syntax is checked as below)
        value = raw.decode("latin-1")
        scheme, _, token = value.strip(" ").partition(" ")
        if scheme.lower() != "bearer":
            # RFC 6750 §3.1: a request with another scheme has no bearer credentials; the challenge has no error code
            raise HttpError(401, SERVER_ERROR, "Unauthorized: use the Bearer scheme in the Authorization header",
                            [(b"www-authenticate", self.challenge.encode())])  # fmt: skip
        token = token.strip(" ")
        if len(token) > MAX_TOKEN_LENGTH:
            raise self.invalid(f"the token is longer than {MAX_TOKEN_LENGTH} characters")
        if not token:
            raise self.invalid("the Authorization header is not 'Bearer <token>'")
        return token  # its syntax is checked by ``authenticate`` unless it was verified before

    def invalid(self, description: str) -> HttpError:
        """401 ``invalid_token`` (RFC 6750 §3.1): the client should get a new token and try again."""
        header = www_authenticate(self.resource_metadata, "invalid_token", description)
        return HttpError(401, SERVER_ERROR, f"Unauthorized: {description}", [(b"www-authenticate", header.encode())])

    def bad_request(self, description: str) -> HttpError:
        """400 ``invalid_request`` (RFC 6750 §3.1): the request itself is malformed."""
        header = www_authenticate(self.resource_metadata, "invalid_request", description)
        return HttpError(400, INVALID_REQUEST, f"Bad Request: {description}", [(b"www-authenticate", header.encode())])

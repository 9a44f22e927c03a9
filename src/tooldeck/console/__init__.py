"""The operator console (``tooldeck serve --http --console``, ``Deck.use_console``): pages at ``/console`` for the
people who run a deck — what it serves, who is connected, which calls ran, and the calls waiting for an approver.

``app.py`` is the console as an ASGI layer in front of the HTTP app's authentication (sign-in, cookie sessions,
CSRF tokens, headers, actions, their audit records), ``pages.py`` and ``charts.py`` render its pages as HTML and
SVG on the server, ``trail.py`` reads the audit trail the calls page and the overview show, and ``static/`` holds
its one stylesheet and its one small script (partial updates), served from the package: no build step, nothing
fetched from elsewhere.
"""

from __future__ import annotations

from .app import Console

__all__ = ["Console"]

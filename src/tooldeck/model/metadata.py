"""Registration checks every feature shares: names, icons, and whether a function is a coroutine function."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..protocol.errors import RegistrationError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_ICON_KEYS = {"src": "src", "mimeType": "mimeType", "mime_type": "mimeType", "sizes": "sizes", "theme": "theme"}
_ICON_SCHEMES = ("https:", "http:", "data:")
_SCOPE_TOKEN = re.compile(r"[!#-\[\]-~]+")  # RFC 6749 section 3.3: %x21 / %x23-5B / %x5D-7E


def check_name(name: Any, kind: str = "tool") -> str:
    """``name`` if it is a valid tool (or prompt: ``kind``) name, else RegistrationError stating the rule."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise RegistrationError(
            f"invalid {kind} name {name!r}: use 1-128 characters from A-Z a-z 0-9 _ - . (no spaces)"
        )
    return name


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine: an ``async def`` function, or an object with an async ``__call__``."""
    import inspect  # deferred: registration needs it, start-up does not

    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def normalize_icons(icons: Any, owner: str) -> tuple[dict[str, Any], ...] | None:
    """Icons in wire form. ``src`` must be an https/http URL or a data: URI: clients refuse other schemes."""
    if icons is None:
        return None
    if not isinstance(icons, list | tuple):
        raise RegistrationError(f"{owner}: icons must be a list of dicts with 'src'")
    out = []
    for i, icon in enumerate(icons):
        if not isinstance(icon, dict) or not isinstance(icon.get("src"), str):
            raise RegistrationError(f"{owner}: icons[{i}] must be a dict with a string 'src'")
        wire: dict[str, Any] = {}
        for key, value in icon.items():
            wire_key = _ICON_KEYS.get(key)
            if wire_key is None:
                raise RegistrationError(f"{owner}: icons[{i}] has unknown key {key!r} (src, mime_type, sizes, theme)")
            wire[wire_key] = value
        if not wire["src"].lower().startswith(_ICON_SCHEMES):
            raise RegistrationError(f"{owner}: icons[{i}].src must be an https:, http: or data: URI")
        sizes = wire.get("sizes")
        if sizes is not None and (not isinstance(sizes, list) or not all(isinstance(s, str) for s in sizes)):
            raise RegistrationError(f"{owner}: icons[{i}].sizes must be a list of strings like '48x48' or 'any'")
        if wire.get("theme") not in (None, "light", "dark"):
            raise RegistrationError(f"{owner}: icons[{i}].theme must be 'light' or 'dark'")
        out.append(wire)
    return tuple(out)


def check_security_level(level: Any, owner: str) -> int | None:
    """None (the policy decides) or an integer from 0 to 10 (seed 002)."""
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 10:
        raise RegistrationError(f"{owner}: security_level must be an integer from 0 to 10, got {level!r}")
    return level


def check_scopes(scopes: Any, owner: str) -> tuple[str, ...]:
    """A list of scope names: RFC 6749 scope tokens (printable ASCII but space, '"' and '\\'), as the definition
    format's schema has them."""
    if scopes is None:
        return ()
    if isinstance(scopes, str) or not isinstance(scopes, list | tuple):
        raise RegistrationError(f"{owner}: scopes must be a list of strings, got {scopes!r}")
    for scope in scopes:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
            raise RegistrationError(
                f"{owner}: {scope!r} is not a scope (a non-empty string of printable ASCII without spaces or quotes)"
            )
    return tuple(scopes)

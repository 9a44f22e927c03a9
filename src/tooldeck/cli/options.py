"""Argument types of the command line: each refuses a bad value with one line that says what is wanted.

Every refusal is an ``argparse.ArgumentTypeError``, whose text argparse prints as it is after the option's name
(``argument --port: must be a port number from 0 to 65535, got 'abc'``). A ValueError would be printed as
``invalid port value: 'abc'``, naming the Python function instead of what the option wants.
"""

from __future__ import annotations

import argparse


def port(text: str) -> int:
    value = _integer(text)
    if value is None or not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (like 10 or 0.5), got {text!r}")
    return value


def positive_int(text: str) -> int:
    value = _integer(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return value


def text(value: str) -> str:
    """A name or a version: any text but a blank one (it is shown to clients as it is)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"must not be blank, got {value!r}")
    return value


def node_id(value: str) -> str:
    """A process's name in a fleet: it goes into ids that cross processes and into the audit trail's file name."""
    if not (0 < len(value) <= 64 and value.isascii() and value.replace("_", "").replace("-", "").isalnum()):
        raise argparse.ArgumentTypeError(f"must be 1 to 64 letters, digits, '_' or '-', got {value!r}")
    return value


def _integer(text: str) -> int | None:
    """``text`` as a decimal integer (surrounding spaces allowed), or None."""
    import re  # argparse has loaded it already

    stripped = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", stripped):  # int() would also take '1_000' and Arabic-Indic digits
        return None
    return int(stripped)


def proxy_address(text: str) -> str:
    """``--trusted-proxy``: an IP address or a network."""
    import ipaddress

    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an IP address or a network (like 10.0.0.0/8), got {text!r}"
        ) from None
    return text


def probe_path(text: str) -> str | None:
    """``--healthz-path`` / ``--readyz-path``: a path from the root, or '' for none."""
    if text == "":
        return None
    if not text.startswith("/") or any(c in text for c in "?# ") or not text.isprintable():
        raise argparse.ArgumentTypeError(f"must be a path from the root (like /healthz), or '' for none, got {text!r}")
    return text

"""The 2026-07-28 envelope: which requests claim the modern era, the -32602 of a bad envelope, -32022, and the marks
of a modern result."""

from __future__ import annotations

from typing import Any

import pytest

from tooldeck.protocol import envelope
from tooldeck.protocol.envelope import Envelope
from tooldeck.protocol.errors import InvalidParamsError, UnsupportedVersionError

V = envelope.PROTOCOL_VERSION
C = envelope.CLIENT_CAPABILITIES


@pytest.mark.parametrize(
    ("params", "claims"),
    [
        ({"_meta": {V: "2026-07-28"}}, True),
        ({"_meta": {V: None}}, True),  # the key is the claim; its value is checked afterwards
        ({"_meta": {C: {}}}, False),
        ({"_meta": {"progressToken": 1}}, False),
        ({"_meta": "x"}, False),
        ({}, False),
        (None, False),
        ([], False),
    ],
)
def test_a_request_claims_the_modern_era_by_the_protocol_version_key(params: Any, claims: bool) -> None:
    assert envelope.claims_modern(params) is claims


def test_a_full_envelope_is_read() -> None:
    info = {"name": "c", "version": "1"}
    meta = {V: "2026-07-28", C: {"sampling": {}}, envelope.CLIENT_INFO: info, envelope.LOG_LEVEL: "debug"}
    assert envelope.read({"_meta": meta}) == Envelope("2026-07-28", {"sampling": {}}, info, "debug")
    assert envelope.read({"_meta": {V: "2026-07-28", C: {}}}) == Envelope("2026-07-28", {})


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (None, '"_meta" must be an object'),
        ({}, f"_meta lacks '{V}' and '{C}'"),
        ({V: "2026-07-28"}, f"_meta lacks '{C}'"),
        ({C: {}}, f"_meta lacks '{V}'"),
        ({V: 2026, C: {}}, "must be a non-empty string"),
        ({V: "", C: {}}, "must be a non-empty string"),
        ({V: "2026-07-28", C: []}, f'"{C}" must be an object'),
        ({V: "2026-07-28", C: {}, envelope.CLIENT_INFO: {"name": "c"}}, 'string "name" and "version"'),
        ({V: "2026-07-28", C: {}, envelope.LOG_LEVEL: "loud"}, "unknown log level 'loud'"),
    ],
)
def test_a_bad_envelope_is_minus_32602_saying_what_is_wrong(meta: Any, message: str) -> None:
    params = {} if meta is None else {"_meta": meta}
    with pytest.raises(InvalidParamsError, match=message) as caught:
        envelope.read(params)
    assert caught.value.to_error()["code"] == -32602


def test_an_unsupported_version_is_minus_32022_naming_the_modern_ones() -> None:
    envelope.check_version("2026-07-28")
    for version in ("2025-11-25", "v999.0.0"):
        with pytest.raises(UnsupportedVersionError) as caught:
            envelope.check_version(version)
        assert caught.value.to_error() == {
            "code": -32022,
            "message": f"Unsupported protocol version '{version}' (supported: 2026-07-28)",
            "data": {"supported": ["2026-07-28"], "requested": version},
        }


def test_a_complete_result_has_its_type_the_server_and_the_hints_in_a_new_dict() -> None:
    server = {"name": "s", "version": "1"}
    result = {"tools": [], "_meta": {"x": 1}}
    done = envelope.complete(result, server, (5000, "public"))
    assert done == {"tools": [], "resultType": "complete", "ttlMs": 5000, "cacheScope": "public",
                    "_meta": {"x": 1, envelope.SERVER_INFO: server}}  # fmt: skip
    assert result == {"tools": [], "_meta": {"x": 1}}  # a shared (cached) result is never changed
    assert envelope.complete({}, server) == {"resultType": "complete", "_meta": {envelope.SERVER_INFO: server}}

"""Sealed requestState: intact, current, the principal's and the request's own, and single-use when asked."""

from __future__ import annotations

import base64

import orjson
import pytest

from tooldeck.security.request_state import RequestStateError, RequestStates, request_digest

KEY = b"k" * 32
REQUEST = request_digest("tools/call", "deploy", {"service": "web", "replicas": 3})


def states(key: bytes = KEY, now: list[float] | None = None, **options: object) -> RequestStates:
    clock = now if now is not None else [1_000.0]
    return RequestStates(key, clock=lambda: clock[0], **options)  # type: ignore[arg-type]


def test_a_state_opens_with_its_data_for_its_principal_and_request() -> None:
    keeper = states()
    state = keeper.seal("alice", REQUEST, {"answers": {"confirm": {"action": "accept"}}})
    assert keeper.open(state, "alice", REQUEST) == {"answers": {"confirm": {"action": "accept"}}}
    assert keeper.open(state, "alice", REQUEST) is not None  # not single-use unless asked


def test_any_process_holding_the_key_opens_it() -> None:
    state = states().seal(None, REQUEST, [1, 2])
    assert states().open(state, None, REQUEST) == [1, 2]
    with pytest.raises(RequestStateError, match="integrity check"):
        states(key=b"x" * 32).open(state, None, REQUEST)


def test_the_digest_binds_method_name_and_arguments_not_key_order() -> None:
    assert request_digest("tools/call", "deploy", {"a": 1, "b": 2}) == request_digest(
        "tools/call", "deploy", {"b": 2, "a": 1}
    )
    others = {request_digest("tools/call", "deploy", {"a": 1, "b": 3}), request_digest("prompts/get", "deploy", {"a": 1, "b": 2}),
              request_digest("tools/call", "destroy", {"a": 1, "b": 2})}  # fmt: skip
    assert request_digest("tools/call", "deploy", {"a": 1, "b": 2}) not in others and len(others) == 3


@pytest.mark.parametrize("part", ["payload", "tag", "tag's last byte", "tag cut short"])
def test_a_changed_state_is_refused(part: str) -> None:
    keeper = states()
    body, tag = keeper.seal("alice", REQUEST, {"role": "user"}).split(".")
    if part == "payload":
        payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        payload["d"] = {"role": "admin"}
        body = base64.urlsafe_b64encode(orjson.dumps(payload)).rstrip(b"=").decode()
    elif part == "tag":
        tag = ("A" if tag[0] != "A" else "B") + tag[1:]
    else:  # every byte of the MAC counts
        raw = bytearray(base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)))
        if part == "tag cut short":
            raw = raw[:8]
        else:
            raw[-1] ^= 1
        tag = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    with pytest.raises(RequestStateError, match="integrity check"):
        keeper.open(f"{body}.{tag}", "alice", REQUEST)


@pytest.mark.parametrize("state", [None, 7, "", "abc", "a.b.c", "!!!.???", "x" * 70_000, {"d": 1}])
def test_what_was_never_issued_is_refused(state: object) -> None:
    with pytest.raises(RequestStateError):
        states().open(state, "alice", REQUEST)


def test_an_expired_state_is_refused() -> None:
    now = [1_000.0]
    keeper = states(now=now, ttl=60)
    state = keeper.seal("alice", REQUEST)
    now[0] += 59.9
    keeper.open(state, "alice", REQUEST)
    now[0] += 0.1
    with pytest.raises(RequestStateError, match="expired"):
        keeper.open(state, "alice", REQUEST)


def test_another_principal_or_request_is_refused() -> None:
    keeper = states()
    state = keeper.seal("alice", REQUEST)
    with pytest.raises(RequestStateError, match="another principal"):
        keeper.open(state, "mallory", REQUEST)
    with pytest.raises(RequestStateError, match="another principal"):
        keeper.open(state, None, REQUEST)
    with pytest.raises(RequestStateError, match="another request"):
        keeper.open(state, "alice", request_digest("tools/call", "deploy", {"service": "db", "replicas": 3}))


async def test_a_state_is_spent_once() -> None:
    now = [1_000.0]
    keeper = states(now=now, ttl=60)
    state = keeper.seal("alice", REQUEST, "x")
    assert keeper.open(state, "alice", REQUEST) == "x"  # opening spends nothing
    assert await keeper.spend(state, "alice", REQUEST) == "x"
    with pytest.raises(RequestStateError, match="used already"):
        await keeper.spend(state, "alice", REQUEST)
    fresh = keeper.seal("alice", REQUEST, "y")  # each seal is a new state
    assert await keeper.spend(fresh, "alice", REQUEST) == "y"
    with pytest.raises(RequestStateError, match="another principal"):  # checked as open checks, before spending
        await keeper.spend(keeper.seal("alice", REQUEST), "bob", REQUEST)


async def test_two_keepers_sharing_a_spent_store_spend_a_state_once_between_them() -> None:
    # Two processes holding one key and one spent store: what one spent, the other refuses.
    from tooldeck.security.spent import MemorySpentStore

    spent = MemorySpentStore()
    here, there = RequestStates(KEY, spent=spent), RequestStates(KEY, spent=spent)
    state = here.seal("alice", REQUEST, "x")
    assert await there.spend(state, "alice", REQUEST) == "x"
    with pytest.raises(RequestStateError, match="used already"):
        await here.spend(state, "alice", REQUEST)


def test_the_key_must_be_long_enough() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        RequestStates(b"short")

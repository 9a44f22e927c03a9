"""Existing HTTP tests in fleet mode: each runs unchanged against two (and three) apps over shared backends (an
in-memory record, and Redis) behind a round-robin balancer that sends every request of a session to the other app than the one
before (round_robin.py) — sessions, resumption, elicitation, sampling, tasks, subscriptions and security (API keys and JWTs,
levels and scopes, a fresher token's scopes, required credentials, rate limits shared by the processes), as one
process serves them.

Left out, each for a reason of its own: what a test reads or drives in one process's memory (the reaper of
``test_idle_sessions_are_reaped_but_not_while_connected``, ``max_sessions`` counted per process, the thousand
sessions counted in one app's table); tests of what comes before any session (guards, headers, bodies, a failed
initialize), where a second process changes nothing; the HTTP flood guard, which guards each process's own sockets;
the audit trail of HTTP refusals, one file per process in a fleet (tests/fleet reads them all); the second GET stream of
``test_get_opens_the_standalone_stream_and_list_changed_arrives_there``, which is 409 on the process holding the
first and, on another, replaces it (test_fleet_sessions.py); and, over Redis only,
``test_over_http_a_tasks_notifications_arrive_on_the_get_stream``, whose task-augmented call is answered with JSON
only if the task's first progress comes after the answer is written, which a store a round trip away does not
promise (the answer is then an SSE stream, as the transport allows).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import pytest

from asgi_client import AsgiClient
from asking import asking_deck
from eras import era_deck
from security import test_http_policy
from security.conftest import signer  # noqa: F401  # the fixture, for the security tests run here
from server import test_client_requests, test_tasks
from transports.http import test_app, test_eras, test_listen, test_rounds
from transports.http.fleet_apps import KINDS
from transports.http.round_robin import RoundRobin, fleet_factory

CLIENT = object()  # the test's ``client`` fixture: an AsgiClient of the module's app (made in fleet mode)
TMP = object()  # the test's ``tmp_path`` fixture
SIGNER = object()  # the security tests' ``signer`` fixture (a key and its JWKS)

CASES: list[tuple[ModuleType, str, dict[str, Any]]] = [
    (test_app, "test_posted_notification_is_202_with_no_body", {}),
    (test_app, "test_posted_response_is_202", {}),
    (test_app, "test_request_answered_with_json_when_nothing_comes_first", {"chunk_size": None}),
    (test_app, "test_request_answered_with_sse_when_notifications_come_first", {}),
    (test_app, "test_json_response_option_and_json_only_clients_always_get_json", {}),
    (test_app, "test_unknown_and_deleted_sessions_are_404", {}),
    (test_app, "test_missing_or_other_supported_version_headers_are_served", {"version": "2025-06-18"}),
    (test_app, "test_delete_cancels_work_in_flight_and_releases_the_session", {}),
    (test_app, "test_cancelled_request_ends_its_post_without_a_response", {}),
    (test_app, "test_a_closed_stream_resumes_with_last_event_id", {}),
    (test_app, "test_replay_never_crosses_streams", {}),
    (test_app, "test_unknown_last_event_id_is_404", {"last_event_id": "nonsense"}),
    (test_app, "test_batches_only_in_2025_03_26_sessions", {}),
    (test_client_requests, "test_over_http_the_request_travels_on_the_calls_stream", {}),
    (
        test_client_requests,
        "test_over_http_a_sampling_request_travels_on_the_calls_stream_and_its_answer_wakes_the_tool",
        {},
    ),
    (test_tasks, "test_over_http_tasks_list_is_not_offered_and_results_cross_sessions", {}),
    (test_tasks, "test_over_http_a_tasks_notifications_arrive_on_the_get_stream", {"kinds": ("memory",)}),
    (test_rounds, "test_a_tampered_state_or_a_malformed_answer_is_400_with_minus_32602", {}),
    (test_rounds, "test_a_level_8_tool_is_confirmed_over_http_once_and_for_its_arguments", {"tmp_path": TMP}),
    (test_listen, "test_the_answer_is_a_stream_that_opens_with_the_acknowledgement", {}),
    (test_listen, "test_the_filter_is_honoured_on_the_stream", {}),
    (test_listen, "test_a_malformed_filter_is_a_json_rpc_error", {}),
    (test_eras, "test_every_method_over_http", {"client": CLIENT}),
    (test_eras, "test_progress_and_logs_stream_on_the_request_only_when_asked", {"client": CLIENT}),
    (test_eras, "test_both_eras_on_one_endpoint_at_the_same_time", {"client": CLIENT}),
    (test_http_policy, "test_levels_over_http_with_keys_and_jwts", {"tmp_path": TMP, "signer": SIGNER}),
    (test_http_policy, "test_bad_tokens_get_invalid_token", {"tmp_path": TMP, "signer": SIGNER}),
    (
        test_http_policy,
        "test_a_fresher_token_with_fewer_scopes_takes_them_away_on_the_same_session",
        {"tmp_path": TMP, "signer": SIGNER},
    ),
    (
        test_http_policy,
        "test_the_policy_can_require_credentials_and_narrow_the_algorithms",
        {"tmp_path": TMP, "signer": SIGNER},
    ),
    (test_http_policy, "test_rate_limits_over_http", {"tmp_path": TMP, "signer": SIGNER}),
]

DECKS: dict[ModuleType, Callable[[], Any]] = {
    test_app: test_app.make_deck,
    test_client_requests: test_client_requests.make_deck,
    test_tasks: lambda: test_tasks.make_deck()[0],
    test_rounds: lambda deck: alike(deck, asking_deck(state_key=test_rounds.KEY)),
    test_listen: era_deck,
    test_eras: era_deck,
    test_http_policy: lambda deck: test_http_policy.secured_deck(deck.policy),  # another process, the same policy
}


def alike(deck: Any, other: Any) -> Any:
    """``other`` under ``deck``'s policy, if the test gave it one: another process of the same deployment."""
    if getattr(deck, "_security", None) is not None:
        other.apply_policy(deck.policy)
    return other


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("module", "name", "arguments"), CASES, ids=[name for _, name, _ in CASES])
async def test_in_fleet_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                             at_loop_end: Callable[[Callable[[], Awaitable[None]]], None], kind: str, count: int,
                             module: ModuleType, name: str, arguments: dict[str, Any]) -> None:  # fmt: skip
    arguments = dict(arguments)
    if kind not in arguments.pop("kinds", KINDS):
        pytest.skip(f"not over {kind} (see the module docstring)")
    url = kind if kind == "memory" else request.getfixturevalue("redis_url")
    made: list[RoundRobin] = []
    factory = fleet_factory(url, DECKS[module], at_loop_end, count)

    def http_app(deck: Any, **options: Any) -> RoundRobin:
        made.append(factory(deck, **options))
        return made[-1]

    monkeypatch.setattr(module, "HttpApp", http_app)
    for name_, fixture in (("tmp_path", TMP), ("signer", SIGNER)):
        if arguments.get(name_) is fixture:
            arguments[name_] = request.getfixturevalue(name_)
    if arguments.get("client") is CLIENT:
        arguments["client"] = AsgiClient(http_app(DECKS[module]()))
    await getattr(module, name)(**arguments)
    served = [turn for robin in made for turn in robin.served]
    assert 1 in served  # another process than the one whose deck the test holds served its requests


async def test_the_balancer_never_sends_a_session_s_next_request_to_the_same_app(
    at_loop_end: Callable[[Callable[[], Awaitable[None]]], None],
) -> None:
    from asgi_client import AsgiClient

    robin = fleet_factory("memory", test_app.make_deck, at_loop_end, count=3)(test_app.make_deck())
    client = AsgiClient(robin)
    sessions = [await client.initialize() for _ in range(2)]
    robin.served.clear()
    for _ in range(4):
        for session in sessions:
            response = await client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=session)
            assert response.status == 200
    for first in (0, 1):
        turns = robin.served[first::2]  # one session's requests
        assert all(a != b for a, b in itertools.pairwise(turns)) and set(turns) == {0, 1, 2}

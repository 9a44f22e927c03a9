"""What one process announces reaches a session's GET stream held by another: ``list_changed`` (a prompt added on
one process) and ``resources/updated`` (a resource touched on one process, subscribed to on another)."""

from __future__ import annotations

from pathlib import Path

from fleet.cluster import TOKENS, Listener, RoundRobin, Tally, fleet


def session_on(urls: list[str]) -> tuple[RoundRobin, Listener]:
    """A session whose GET stream is held by the first process of ``urls``."""
    client = RoundRobin(urls, TOKENS["alice"], Tally())
    client.initialize()
    client.turn = 0
    return client, Listener(client).start()


def test_list_changed_on_one_process_reaches_a_get_stream_on_another(redis_url: str, tmp_path: Path) -> None:
    with fleet(tmp_path, redis_url) as running:
        client, listener = session_on(running.urls)
        try:
            for turn in (1, 2, 1, 2):  # the GET stream is on n1; the prompt comes and goes on n2 and n3
                client.turn = turn
                client.call("toggle")
                listener.wait_for("notifications/prompts/list_changed", 10)
        finally:
            listener.stop()
            client.close()


def test_a_subscription_made_on_one_process_is_served_by_the_process_holding_the_get_stream(
    redis_url: str, tmp_path: Path
) -> None:
    with fleet(tmp_path, redis_url) as running:
        client, listener = session_on(running.urls)
        try:
            client.turn = 1
            client.result("resources/subscribe", {"uri": "fleet://board"})  # on n2
            client.turn = 2
            client.call("touch")  # on n3
            listener.wait_for("notifications/resources/updated", 5)  # on n1's GET stream
        finally:
            listener.stop()
            client.close()

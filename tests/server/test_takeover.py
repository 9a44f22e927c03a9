"""The identity a task taken over from a dead node runs under: a ``Principal`` made from the owner id the task is
bound to, so the run's audit record (and the tool's Context) read it as they read the caller's own."""

from __future__ import annotations

import pytest

from tooldeck.security.principal import Principal
from tooldeck.server.takeover import identity


@pytest.mark.parametrize(
    "principal",
    [
        Principal("ci"),
        Principal("alice", method="local"),
        Principal("ci", method="jwt", issuer="https://auth.example.com"),
        Principal("a#b:c"),
    ],
)
def test_the_owner_id_of_a_task_gives_back_its_principal(principal: Principal) -> None:
    found = identity(principal.id)
    assert found is not None
    assert (found.id, found.subject, found.method, found.issuer) == (
        principal.id, principal.subject, principal.method, principal.issuer)  # fmt: skip


def test_an_owner_id_of_another_shape_is_kept_as_it_is() -> None:
    found = identity("custom-backend-user")
    assert found is not None and found.id == "custom-backend-user"
    assert identity(None) is None

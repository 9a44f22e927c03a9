from __future__ import annotations

from typing import Any

import orjson
import pytest

from tooldeck.model.catalog import Catalog
from tooldeck.protocol.cursor import CursorCodec
from tooldeck.protocol.errors import InvalidParamsError


def make(n: int) -> Catalog[str]:
    catalog: Catalog[str] = Catalog("tools", lambda item: {"name": item})
    for i in range(n):
        catalog.add(f"t{i}", f"t{i}")
    return catalog


def pages(catalog: Catalog[str], size: int, codec: CursorCodec) -> list[list[str]]:
    out, cursor = [], None
    while True:
        items, cursor = catalog.page(cursor, size, codec)
        out.append([item["name"] for item in items])
        if cursor is None:
            return out


@pytest.mark.parametrize(("n", "size", "expected_pages"), [(0, 3, 1), (1, 3, 1), (3, 3, 1), (4, 3, 2), (10, 3, 4)])
def test_pages_cover_every_item_once(n: int, size: int, expected_pages: int) -> None:
    codec = CursorCodec()
    got = pages(make(n), size, codec)
    assert len(got) == expected_pages
    assert [name for page in got for name in page] == [f"t{i}" for i in range(n)]


def test_unpaginated_listing_is_one_cached_fragment() -> None:
    catalog = make(3)
    items, cursor = catalog.page(None, None, CursorCodec())
    assert cursor is None
    assert orjson.loads(orjson.dumps(items)) == [{"name": "t0"}, {"name": "t1"}, {"name": "t2"}]
    assert catalog.listing_json() is items
    catalog.add("t3", "t3")
    assert catalog.listing_json() is not items


def test_pages_stay_stable_when_items_change_between_requests() -> None:
    codec = CursorCodec()
    catalog = make(6)
    first, cursor = catalog.page(None, 2, codec)
    catalog.remove("t1")  # already delivered
    catalog.remove("t2")  # not yet delivered
    catalog.add("t9", "t9")
    rest = []
    while cursor:
        items, cursor = catalog.page(cursor, 2, codec)
        rest += [item["name"] for item in items]
    assert [item["name"] for item in first] == ["t0", "t1"]
    assert rest == ["t3", "t4", "t5", "t9"]


def tamper(cursor: str, at: int) -> str:
    return cursor[:at] + ("A" if cursor[at] != "A" else "B") + cursor[at + 1 :]


@pytest.mark.parametrize(
    "cursor",
    ["", "garbage", "!!!", 5, None.__class__, ["x"], "dG9vbHM6MQ"],
)
def test_garbage_cursors_are_refused(cursor: Any) -> None:
    with pytest.raises(InvalidParamsError, match="Invalid cursor"):
        make(5).page(cursor, 2, CursorCodec())


def test_tampered_and_foreign_cursors_are_refused() -> None:
    codec = CursorCodec()
    catalog = make(5)
    _, cursor = catalog.page(None, 2, codec)
    assert cursor is not None
    for at in range(len(cursor)):  # every character matters, including the last one's spare bits
        with pytest.raises(InvalidParamsError):
            catalog.page(tamper(cursor, at), 2, codec)
    with pytest.raises(InvalidParamsError):
        catalog.page(cursor, 2, CursorCodec())  # another server's key
    prompts: Catalog[str] = Catalog("prompts", lambda item: item)
    with pytest.raises(InvalidParamsError):
        prompts.page(cursor, 2, codec)  # minted for another list


def test_a_shared_secret_makes_cursors_portable_between_processes() -> None:
    catalog = make(5)
    _, cursor = catalog.page(None, 2, CursorCodec(b"k" * 32))
    items, _ = catalog.page(cursor, 2, CursorCodec(b"k" * 32))
    assert [item["name"] for item in items] == ["t2", "t3"]


def test_listeners_hear_every_change() -> None:
    catalog = make(0)
    events: list[int] = []
    catalog.subscribe(lambda: events.append(len(catalog)))
    catalog.add("a", "a")
    catalog.replace("a", "b")
    catalog.remove("a")
    assert events == [1, 1, 0]


def test_register_refuses_taken_keys_and_unregister_unknown_ones() -> None:
    from tooldeck.protocol.errors import RegistrationError

    catalog: Catalog[str] = Catalog("tools", lambda item: item, key=lambda item: item, identity="tool named")
    assert catalog.register("a") == "a"
    with pytest.raises(RegistrationError, match="a tool named 'a' is already registered; remove it first or choose"):
        catalog.register("a")
    with pytest.raises(RegistrationError, match="no tool named 'b' is registered"):
        catalog.unregister("b")
    assert catalog.unregister("a") == "a"
    with pytest.raises(TypeError, match="no key function"):
        make(0).register("x")

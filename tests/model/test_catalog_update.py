"""Catalog.update: several changes as one — replaced items keep their place, new ones come last, removed ones go,
listeners hear one change, and cursors handed out before it still page correctly."""

from __future__ import annotations

import orjson

from tooldeck.model.catalog import Catalog
from tooldeck.protocol.cursor import CursorCodec


class Item:
    def __init__(self, name: str, version: int = 1) -> None:
        self.name = name
        self.version = version


def make(*names: str) -> tuple[Catalog[Item], list[int]]:
    """A catalog of ``names`` (version 1 each) and the list its listener appends to on every change."""
    catalog: Catalog[Item] = Catalog(
        "tools", lambda item: {"name": item.name, "version": item.version}, key=lambda item: item.name
    )
    for name in names:
        catalog.register(Item(name))
    events: list[int] = []
    catalog.subscribe(lambda: events.append(1))
    return catalog, events


def listed(catalog: Catalog[Item]) -> list[str]:
    return [f"{wire['name']}@{wire['version']}" for wire in catalog.listing()]


def test_update_replaces_in_place_appends_and_removes_with_one_event() -> None:
    catalog, events = make("a", "b", "c", "d")
    new_b, new_d = Item("b", 2), Item("d", 2)
    catalog.update({"d": new_d, "e": Item("e"), "b": new_b, "f": Item("f")}, ["c", "a"])
    assert listed(catalog) == ["b@2", "d@2", "e@1", "f@1"]
    assert [item.name for item in catalog] == ["b", "d", "e", "f"] and len(catalog) == 4
    assert catalog.get("b") is new_b and catalog.get("d") is new_d and "a" not in catalog and "c" not in catalog
    assert events == [1]


def test_update_invalidates_the_cached_listings() -> None:
    catalog, _ = make("a", "b")
    before = catalog.listing_json()
    assert catalog.listing_json() is before  # cached until a change
    catalog.update({"a": Item("a", 2)})
    assert orjson.loads(orjson.dumps(catalog.listing_json())) == [
        {"name": "a", "version": 2},
        {"name": "b", "version": 1},
    ]


def test_removing_a_name_that_is_not_there_is_not_an_error() -> None:
    catalog, events = make("a")
    catalog.update({}, ["ghost"])
    assert listed(catalog) == ["a@1"] and events == [1]


def test_a_catalog_stays_consistent_after_an_update() -> None:
    catalog, events = make("a", "b", "c")
    catalog.update({"d": Item("d")}, ["b"])
    catalog.remove("a")  # finds its sequence number in the rebuilt order
    catalog.register(Item("b"))  # a removed name is free again, and comes last
    assert listed(catalog) == ["c@1", "d@1", "b@1"] and events == [1, 1, 1]


def pages(catalog: Catalog[Item], size: int, codec: CursorCodec, cursor: str | None = None) -> list[str]:
    names: list[str] = []
    while True:
        items, cursor = catalog.page(cursor, size, codec)
        names += [f"{wire['name']}@{wire['version']}" for wire in items]  # type: ignore[union-attr]
        if cursor is None:
            return names


def test_a_cursor_from_before_an_update_still_pages_correctly() -> None:
    codec = CursorCodec()
    catalog, _ = make("t0", "t1", "t2", "t3", "t4", "t5")
    first, cursor = catalog.page(None, 2, codec)
    assert [wire["name"] for wire in first] == ["t0", "t1"] and cursor is not None  # type: ignore[index]
    catalog.update(
        {"t0": Item("t0", 2), "t3": Item("t3", 2), "t9": Item("t9")},  # t0 delivered already, t3 not yet
        ["t1", "t4"],  # t1 delivered already, t4 not yet
    )
    # nothing delivered twice, nothing skipped: the replaced t3 on its old place, the new t9 at the end
    assert pages(catalog, 2, codec, cursor) == ["t2@1", "t3@2", "t5@1", "t9@1"]
    assert pages(catalog, 2, codec) == ["t0@2", "t2@1", "t3@2", "t5@1", "t9@1"]
    assert pages(catalog, 100, codec) == ["t0@2", "t2@1", "t3@2", "t5@1", "t9@1"]


def test_a_cursor_at_a_removed_item_continues_after_it() -> None:
    codec = CursorCodec()
    catalog, _ = make("a", "b", "c", "d")
    _, cursor = catalog.page(None, 2, codec)  # the cursor points at b
    catalog.update({"e": Item("e")}, ["b", "c"])
    assert pages(catalog, 2, codec, cursor) == ["d@1", "e@1"]

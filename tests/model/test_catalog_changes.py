"""Catalog.take_changes: the items a burst of changes touched (both forms of a replaced one), so an announcement can
be told only to the clients that see one of them; a name changed and changed back is no change."""

from __future__ import annotations

from tooldeck.model.catalog import Catalog


class Item:
    def __init__(self, name: str, version: int = 1) -> None:
        self.name = name
        self.version = version

    def __repr__(self) -> str:
        return f"{self.name}@{self.version}"


def make(*names: str) -> Catalog[Item]:
    catalog: Catalog[Item] = Catalog("tools", lambda item: {"name": item.name}, key=lambda item: item.name)
    for name in names:
        catalog.register(Item(name))
    catalog.take_changes()  # what was registered before the test starts
    return catalog


def test_added_removed_and_replaced_items_are_each_taken_once() -> None:
    catalog = make("a", "b", "c")
    old_b = catalog.get("b")
    new_b = Item("b", 2)
    catalog.register(Item("d"))
    catalog.replace("b", new_b)
    catalog.remove("c")
    taken = catalog.take_changes()
    assert [repr(item) for item in taken] == ["d@1", "b@1", "b@2", "c@1"]
    assert taken[1] is old_b and taken[2] is new_b
    assert catalog.take_changes() == []  # a fresh start


def test_a_burst_that_ends_where_it_began_is_no_change() -> None:
    catalog = make("a")
    catalog.register(Item("temp"))
    catalog.remove("temp")
    kept = catalog.get("a")
    assert kept is not None
    catalog.replace("a", Item("a", 2))
    catalog.replace("a", kept)
    assert catalog.take_changes() == []


def test_update_notes_every_name_it_puts_or_removes() -> None:
    catalog = make("a", "b")
    old_a = catalog.get("a")
    catalog.update({"a": Item("a", 2), "c": Item("c")}, ["b"])
    assert sorted(repr(item) for item in catalog.take_changes()) == ["a@1", "a@2", "b@1", "c@1"]
    assert old_a is not None


def test_the_first_form_of_a_burst_is_what_counts_as_before() -> None:
    catalog = make("a")
    catalog.replace("a", Item("a", 2))
    catalog.replace("a", Item("a", 3))
    assert [repr(item) for item in catalog.take_changes()] == ["a@1", "a@3"]

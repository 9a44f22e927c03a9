"""The registry base: named items in registration order, with change listeners and cursor pagination.

Tools, resources, resource templates and prompts are each kept in a ``Catalog``; listing, paginating and change
events are catalog functions, so every feature lists and pages the same way.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import orjson

from ..protocol import revisions
from ..protocol.codec import Fragment
from ..protocol.cursor import CursorCodec
from ..protocol.errors import RegistrationError

T = TypeVar("T")
_MAX_VIEWS = 256  # visibility classes cached per catalog (a class is a set of scopes; few exist in practice)


class Catalog(Generic[T]):
    """Named items in registration order, with change listeners and cursor pagination.

    ``wire`` turns an item into its wire dict; listings cache the wire form until the catalog changes.
    """

    def __init__(
        self,
        kind: str,
        wire: Callable[[T], Any],
        key: Callable[[T], str] | None = None,
        identity: str = "item",
        alternative: str = "name",
    ) -> None:
        self.kind = kind
        self._wire = wire
        self._key = key
        self._identity = identity  # "tool named": how refusals name an item
        self._alternative = alternative
        self._items: dict[str, T] = {}
        self._seq: dict[str, int] = {}
        self._order: list[int] = []  # sequence numbers, ascending: the order of _items, for cursors to bisect
        self._next_seq = 0
        self._listeners: list[Callable[[], None]] = []
        self._generation = 0  # counts changes: a listing built while one happened is not cached
        self._cache: list[Any] | None = None
        self._cache_json: Fragment | None = None
        self._older: dict[str, tuple[list[Any], Fragment]] = {}  # listings cut down for older revisions
        self._views: dict[Any, Catalog[T]] = {}  # the items each visibility class may see, with their own caches
        # Name -> the item it held before its first change since the last take_changes() (None: it held none), so
        # an announcement can say which items changed and each client hear of it only if it sees one of them.
        self._before: dict[str, T | None] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())

    def get(self, name: str) -> T | None:
        return self._items.get(name)

    def add(self, name: str, item: T) -> None:
        """Register ``item``; the caller has checked that ``name`` is free."""
        self._note(name)
        seq = self._next_seq
        self._next_seq += 1
        self._items[name] = item
        self._seq[name] = seq
        self._order.append(seq)
        self._changed()

    def register(self, item: T) -> T:
        """Add ``item`` under its key; a key that is taken is refused with a message that says what to do."""
        if self._key is None:
            raise TypeError("this catalog has no key function: use add(name, item)")
        name = self._key(item)
        if name in self._items:
            raise RegistrationError(
                f"a {self._identity} {name!r} is already registered; remove it first or choose another "
                f"{self._alternative}"
            )
        self.add(name, item)
        return item

    def unregister(self, name: str) -> T:
        if name not in self._items:
            raise RegistrationError(f"no {self._identity} {name!r} is registered")
        return self.remove(name)

    def replace(self, name: str, item: T) -> None:
        """Swap the item registered under ``name``, keeping its place in the order."""
        self._note(name)
        self._items[name] = item
        self._changed()

    def remove(self, name: str) -> T:
        self._note(name)
        item = self._items.pop(name)
        self._order.pop(bisect.bisect_left(self._order, self._seq.pop(name)))
        self._changed()
        return item

    def update(self, put: dict[str, T], remove: tuple[str, ...] | list[str] = ()) -> None:
        """Several changes as one: ``put`` items replace theirs in place or are added at the end, ``remove`` names
        go. The new state is built aside and swapped in at once, so no listing ever shows half of it, and the
        listeners hear one change."""
        for name in (*put, *remove):
            self._note(name)
        items = {name: item for name, item in self._items.items() if name not in remove}
        seq = {name: number for name, number in self._seq.items() if name not in remove}
        for name, item in put.items():
            if name not in seq:
                seq[name] = self._next_seq
                self._next_seq += 1
            items[name] = item
        self._items, self._seq, self._order = items, seq, sorted(seq.values())
        self._changed()

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def take_changes(self) -> list[T]:
        """The items changed since the last call — each the form a name held before and the one it holds now, where
        they differ: an added item, a removed one, both forms of a replaced one — and a fresh start. A name changed
        and changed back (added, then removed) is no change."""
        changed: list[T] = []
        for name, before in self._before.items():
            now = self._items.get(name)
            if now is before:
                continue
            if before is not None:
                changed.append(before)
            if now is not None:
                changed.append(now)
        self._before = {}
        return changed

    def _note(self, name: str) -> None:
        if name not in self._before:
            self._before[name] = self._items.get(name)

    def listing(self, revision: str | None = None) -> list[Any]:
        """Every item's wire form, in order, as ``revision`` defines it (cached until the next change)."""
        cache = self._cache
        if cache is None:
            generation = self._generation
            cache = [self._wire(item) for item in self._items.values()]
            if generation == self._generation:  # a change made meanwhile (from another thread) voids it
                self._cache = cache
        if revisions.is_latest(revision):
            return cache
        return self._for(revision)[0]  # type: ignore[arg-type]

    def listing_json(self, revision: str | None = None) -> Fragment:
        """``listing()`` pre-encoded, so an unpaginated list costs one copy per request, not one encoding."""
        if not revisions.is_latest(revision):
            return self._for(revision)[1]  # type: ignore[arg-type]
        cached = self._cache_json
        if cached is None:
            generation = self._generation
            cached = Fragment(orjson.dumps(self.listing()))
            if generation == self._generation:
                self._cache_json = cached
        return cached

    def _for(self, revision: str) -> tuple[list[Any], Fragment]:
        found = self._older.get(revision)
        if found is None:
            generation = self._generation
            items = [revisions.listing_item(self.kind, wire, revision) for wire in self.listing()]
            found = (items, Fragment(orjson.dumps(items)))
            if generation == self._generation:
                self._older[revision] = found
        return found

    def page(
        self, cursor: Any, page_size: int | None, codec: CursorCodec, revision: str | None = None
    ) -> tuple[list[Any] | Fragment, str | None]:
        """One page of wire items (as ``revision`` defines them) and the cursor of the next page (None on the last)."""
        if page_size is None:
            if cursor is not None:
                codec.decode(self.kind, cursor)  # still refuse garbage, even when everything fits on one page
            return self.listing_json(revision), None
        start = 0 if cursor is None else bisect.bisect_right(self._order, codec.decode(self.kind, cursor))
        end = start + page_size
        items = self.listing(revision)[start:end]
        return items, codec.encode(self.kind, self._order[end - 1]) if end < len(self._order) and items else None

    def rewire(self, wire: Callable[[T], Any]) -> None:
        """List items through ``wire`` from now on (a sanitiser, say); cached listings are dropped, clients not told:
        what they were sent stays true."""
        self._wire = wire
        self._forget()

    @property
    def wire(self) -> Callable[[T], Any]:
        return self._wire

    def view(self, key: Any, keep: Callable[[T], bool]) -> Catalog[T]:
        """The items ``keep`` lets through, as a catalog of their own (cached under ``key`` until this one changes),
        listed and paged like this one: its cursors are this catalog's, so a client never sees the difference."""
        view = self._views.get(key)
        if view is None:
            view = Catalog(self.kind, self._wire, self._key, self._identity, self._alternative)
            generation = self._generation
            view._items = {name: item for name, item in self._items.items() if keep(item)}
            view._seq = {name: self._seq[name] for name in view._items}
            view._order = sorted(view._seq.values())
            if generation == self._generation:
                if len(self._views) >= _MAX_VIEWS:
                    self._views.clear()
                self._views[key] = view
        return view

    def forget_views(self) -> None:
        """Drop the cached views: what each lets through was decided under rules that no longer hold (a new policy).
        The catalog itself, its listings and its cursors stay as they are."""
        self._views = {}

    def _forget(self) -> None:
        """Drop every cached listing and view; the generation tells listings built meanwhile not to be kept."""
        self._generation += 1
        self._views = {}
        self._cache = None
        self._cache_json = None
        self._older.clear()

    def _changed(self) -> None:
        self._forget()
        for listener in self._listeners:
            listener()

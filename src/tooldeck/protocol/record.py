"""``Record``: equality and repr from ``__slots__``, for the small value classes on the start-up path.

A ``@dataclass(frozen=True, slots=True)`` costs ~0.7 ms to create at import time, and these modules are imported
every time a server starts; a plain ``__slots__`` class costs almost nothing.
"""

from __future__ import annotations


class Record:
    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        names: tuple[str, ...] = self.__slots__
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in names)

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in names if getattr(self, k) is not None)
        return f"{type(self).__name__}({fields})"

"""The pollInterval a task advertises (spec §7.3: a suggestion in milliseconds, which requestors SHOULD respect).

A fixed interval makes every task as slow as the interval: at 500 ms a task that takes 0.6 s reaches a client that
polls at the advertised rate after about 1 s. ``PollInterval`` suggests a fraction of the task's age instead,
between a floor and a ceiling: a young task is polled often, so a short task is seen finished soon after it
finishes (at most a tenth of its running time later by default), and a long one is polled rarely, so it costs few requests (about
two dozen more per tenfold of running time until the ceiling, then one per ceiling).

The spec gives a requestor no way to ask for an interval (``task`` takes only ``ttl``), so the server alone
decides; ``PollInterval.fixed(ms)`` advertises one value throughout.
"""

from __future__ import annotations

from ..protocol.record import Record


class PollInterval(Record):
    """``at(age)``: ``fraction`` of a task's age in seconds, as milliseconds, clamped to ``[floor_ms, ceiling_ms]``.

    With the defaults (50 ms, 5 s, a tenth): 50 ms for the first half second, 60 ms at 0.6 s, 500 ms at 5 s,
    and 5 s from 50 s on.
    """

    __slots__ = ("floor_ms", "ceiling_ms", "fraction")

    def __init__(self, floor_ms: int = 50, ceiling_ms: int = 5000, fraction: float = 0.1) -> None:
        for name, value in (("floor_ms", floor_ms), ("ceiling_ms", ceiling_ms)):
            if type(value) is not int or value < 1:
                raise ValueError(f"poll interval: {name} must be a whole number of milliseconds >= 1, got {value!r}")
        if ceiling_ms < floor_ms:
            raise ValueError(f"poll interval: ceiling_ms ({ceiling_ms}) must not be below floor_ms ({floor_ms})")
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
            raise ValueError(f"poll interval: fraction must be a number from 0 to 1, got {fraction!r}")
        self.floor_ms = floor_ms
        self.ceiling_ms = ceiling_ms
        self.fraction = float(fraction)

    @classmethod
    def fixed(cls, interval_ms: int) -> PollInterval:
        """The same ``interval_ms`` at every age."""
        return cls(interval_ms, interval_ms, 0.0)

    def at(self, age_seconds: float) -> int:
        """The interval to advertise for a task ``age_seconds`` old (a clock that went back counts as age 0)."""
        wanted = int(age_seconds * self.fraction * 1000)
        return self.floor_ms if wanted <= self.floor_ms else min(wanted, self.ceiling_ms)

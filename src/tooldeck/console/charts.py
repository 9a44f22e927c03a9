"""Charts as SVG drawn on the server: no chart library, no script, nothing but presentation attributes (the
console's Content-Security-Policy allows no inline style). Counts per minute, oldest first."""

from __future__ import annotations

from collections.abc import Sequence


def bars(counts: Sequence[int], *, width: int = 720, height: int = 120) -> str:
    """A bar per minute, scaled to the busiest, with the peak and the last minute written out."""
    if not counts:
        return ""
    peak = max(counts) or 1
    step = width / len(counts)
    drawn = "".join(
        f'<rect x="{index * step:.1f}" y="{height - count / peak * (height - 16):.1f}" width="{max(step - 1, 1):.1f}" '
        f'height="{count / peak * (height - 16):.1f}"><title>{count} calls, {len(counts) - index} min ago</title></rect>'
        for index, count in enumerate(counts)
        if count
    )
    return (f'<svg class="bars" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="calls per minute, the busiest {max(counts)}"><text x="0" y="11">peak {max(counts)}/min, last '
            f"minute {counts[-1]}</text>{drawn}</svg>")  # fmt: skip


def spark(counts: Sequence[int], *, width: int = 120, height: int = 24) -> str:
    """A line of counts per minute, small enough for a table cell."""
    if not counts:
        return ""
    peak = max(counts) or 1
    step = width / max(len(counts) - 1, 1)
    points = " ".join(f"{index * step:.1f},{height - 2 - count / peak * (height - 4):.1f}"
                      for index, count in enumerate(counts))  # fmt: skip
    return (f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="calls per minute"><polyline fill="none" points="{points}"/></svg>')  # fmt: skip

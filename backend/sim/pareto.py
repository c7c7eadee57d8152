"""Pareto fronts in O(n log n), every objective minimised.

A point is on the front when no other point is at least as good in every objective and
strictly better in one. Identical points do not dominate each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from sortedcontainers import SortedList


def front_2d(xs: Sequence[float], ys: Sequence[float]) -> list[bool]:
    """Mask of the undominated points when minimising x and y: one sort, one sweep."""
    order = sorted(range(len(xs)), key=lambda i: (xs[i], ys[i]))
    on_front = [False] * len(xs)
    best_y_before = float("inf")  # min y over points with strictly smaller x
    for _, group in groupby(order, key=lambda i: xs[i]):
        members = list(group)
        group_min = ys[members[0]]  # sorted by y within equal x
        for i in members:
            on_front[i] = ys[i] == group_min and group_min < best_y_before
        best_y_before = min(best_y_before, group_min)
    return on_front


class _Staircase:
    """Undominated (y, z) pairs seen so far, z strictly falling as y rises."""

    def __init__(self) -> None:
        self._steps: SortedList = SortedList()

    def dominates(self, y: float, z: float) -> bool:
        """Is there a stored (y', z') with y' <= y and z' <= z?"""
        index = self._steps.bisect_right((y, float("inf"))) - 1
        return index >= 0 and self._steps[index][1] <= z

    def add(self, y: float, z: float) -> None:
        if self.dominates(y, z):
            return
        start = self._steps.bisect_left((y, float("-inf")))
        while start < len(self._steps) and self._steps[start][1] >= z:
            del self._steps[start]
        self._steps.add((y, z))


def front_3d(xs: Sequence[float], ys: Sequence[float], zs: Sequence[float]) -> list[bool]:
    """Mask of the undominated points when minimising x, y and z: sort by x, sweep a staircase."""
    order = sorted(range(len(xs)), key=lambda i: (xs[i], ys[i], zs[i]))
    on_front = [False] * len(xs)
    staircase = _Staircase()
    for _, group in groupby(order, key=lambda i: xs[i]):
        members = list(group)
        within = front_2d([ys[i] for i in members], [zs[i] for i in members])
        for i, undominated_in_group in zip(members, within, strict=True):
            on_front[i] = undominated_in_group and not staircase.dominates(ys[i], zs[i])
        for i in members:
            staircase.add(ys[i], zs[i])
    return on_front

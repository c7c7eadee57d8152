"""MCACHE models: which input vectors of a mini-batch hit the cache, and whose output they reuse.

Vectors are looked up in the order the array consumes them (the rows of the FWD GEMM). A hit
reuses the output of the vector that put the entry in the cache (its "owner"); the cache is
flushed at every weight update, i.e. per mini-batch. Models:

- unbounded: every repeat of a signature in the mini-batch hits its first occurrence;
- direct: `entries` sets of one way, indexed by signature mod entries (its low bits);
- set-associative: entries / ways sets of `ways` ways, LRU replacement.

`owners` is the fast implementation; `reference_owners` is the plain one it must equal.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class CacheModel:
    kind: Literal["unbounded", "direct", "set-associative"]
    entries: int = 1024
    ways: int = 4

    @property
    def associativity(self) -> int:
        return 1 if self.kind == "direct" else self.ways

    @property
    def sets(self) -> int:
        return self.entries // self.associativity


def reference_owners(signatures: np.ndarray, cache: CacheModel) -> np.ndarray:
    """One vector at a time, each set an LRU-ordered dict of signature -> owner."""
    owners = np.arange(len(signatures))
    if cache.kind == "unbounded":
        first: dict[int, int] = {}
        for i, signature in enumerate(signatures.tolist()):
            owners[i] = first.setdefault(signature, i)
        return owners
    sets: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(cache.sets)]
    for i, signature in enumerate(signatures.tolist()):
        entries = sets[signature % cache.sets]
        if signature in entries:
            owners[i] = entries[signature]
            entries.move_to_end(signature)
        else:
            if len(entries) == cache.associativity:
                entries.popitem(last=False)
            entries[signature] = i
    return owners


def owners(signatures: np.ndarray, cache: CacheModel) -> np.ndarray:
    """owner[i]: the vector whose output vector i gets (i itself on a miss)."""
    if cache.kind == "unbounded":
        _, first, inverse = np.unique(signatures, return_index=True, return_inverse=True)
        return first[inverse.reshape(-1)]
    return _set_associative_owners(signatures, cache.sets, cache.associativity)


def _set_associative_owners(signatures: np.ndarray, sets: int, ways: int) -> np.ndarray:
    """Group the accesses by set (sets are independent), fold away every access equal to its
    set's previous one (a hit on the most recently used entry, which changes nothing), and decide
    the rest by LRU's stack property (see `_lru_hits`); a hit reuses the output of its
    signature's latest miss, the vector that put the entry in the cache."""
    count = len(signatures)
    set_of = np.mod(signatures, sets)
    order = np.argsort(set_of, kind="stable")
    sorted_sets, sorted_signatures = set_of[order], signatures[order]
    repeat = np.r_[
        False,
        (sorted_sets[1:] == sorted_sets[:-1]) & (sorted_signatures[1:] == sorted_signatures[:-1]),
    ]
    heads = np.flatnonzero(~repeat)
    head_signatures = sorted_signatures[heads]
    # same signature implies same set, so a stable sort keeps each signature's accesses in order
    by_signature = np.argsort(head_signatures, kind="stable")
    grouped = head_signatures[by_signature]
    same = np.r_[False, grouped[1:] == grouped[:-1]]
    previous = np.full(len(heads), -1, dtype=np.int64)
    previous[by_signature[same]] = by_signature[np.flatnonzero(same) - 1]
    hit = _lru_hits(head_signatures, previous, ways)
    latest_miss = np.maximum.accumulate(np.where(hit[by_signature], -1, np.arange(len(heads))))
    head_owners = np.empty(len(heads), dtype=np.int64)
    head_owners[by_signature] = order[heads][by_signature[latest_miss]]
    head_of_access = np.cumsum(~repeat) - 1
    result = np.empty(count, dtype=np.int64)
    result[order] = head_owners[head_of_access]
    return result


def _lru_hits(signatures: np.ndarray, previous: np.ndarray, ways: int) -> np.ndarray:
    """Hits of an access stream sorted by set (each set's accesses in time order), previous[i]
    the position of the same signature's previous access (-1: none).

    An LRU set holds the `ways` most recently used distinct signatures, so access i hits iff
    fewer than `ways` distinct signatures came between previous[i] and i. The distinct ones in
    a window [a, i) are the positions j there with previous[j] < a. Windows longer than
    `horizon` are first checked on their last `horizon` accesses (>= ways distinct: a miss);
    the few left are counted exactly."""
    positions = np.arange(len(signatures))
    gap = positions - previous - 1
    hit = (previous >= 0) & (gap < ways)
    pending = np.flatnonzero((previous >= 0) & (gap >= ways))
    if len(pending) == 0:
        return hit
    horizon = max(32, 4 * ways)
    length = np.minimum(gap[pending], horizon)
    start = pending - length
    offsets = np.arange(1, horizon + 1)
    window = np.maximum(pending[:, None] - offsets, 0)
    inside = offsets <= length[:, None]
    distinct = (inside & (previous[window] < start[:, None])).sum(1)
    hit[pending] = (distinct < ways) & (length == gap[pending])
    for i in pending[(distinct < ways) & (length < gap[pending])].tolist():
        between = signatures[previous[i] + 1 : i]
        hit[i] = len(np.unique(between)) < ways
    return hit

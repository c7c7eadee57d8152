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
        order = grouping_order(signatures)
        starts = _run_starts(signatures[order])
        result = np.empty(len(signatures), dtype=np.int64)
        result[order] = order[np.flatnonzero(starts)][np.cumsum(starts) - 1]
        return result
    return _set_associative_owners(signatures, cache.sets, cache.associativity)


def grouping_order(keys: np.ndarray) -> np.ndarray:
    """A permutation that makes equal keys adjacent, each run in index order (a stable sort,
    though not necessarily by increasing key). NumPy radix-sorts 8- and 16-bit integers but
    timsorts wider ones, so the int64 keys are sorted 16 bits at a time, least significant first."""
    digits = np.ascontiguousarray(keys, dtype=np.int64).view(np.uint64)
    top = int(digits.max()) if len(digits) else 0
    order = np.argsort(digits.astype(np.uint8 if top < 256 else np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        digit = (digits[order] >> np.uint64(shift)).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Whether each value differs from the one before it (the first always does)."""
    starts = np.empty(len(values), dtype=bool)
    starts[:1] = True
    np.not_equal(values[1:], values[:-1], out=starts[1:])
    return starts


def _set_associative_owners(signatures: np.ndarray, sets: int, ways: int) -> np.ndarray:
    """Stream the accesses set by set (sets are independent; each set's accesses in time order),
    fold away every access equal to its set's previous one (a hit on the most recently used
    entry, which changes nothing), and decide the rest by LRU's stack property (see
    `_lru_hits`); a hit reuses the output of its signature's latest miss, the vector that put
    the entry in the cache."""
    # for a power-of-two count the set is the signature's low bits: & is far faster than mod
    low_bits = sets & (sets - 1) == 0
    order = grouping_order(signatures & (sets - 1) if low_bits else np.mod(signatures, sets))
    stream = signatures[order]  # equal signatures share a set: no need to compare sets
    head = _run_starts(stream)
    heads = np.flatnonzero(head)
    head_signatures = stream[heads]
    # a stable grouping keeps each signature's accesses in stream order
    by_signature = grouping_order(head_signatures)
    grouped = head_signatures[by_signature]
    repeated = np.flatnonzero(grouped[1:] == grouped[:-1]) + 1
    previous = np.full(len(heads), -1, dtype=np.int64)
    previous[by_signature[repeated]] = by_signature[repeated - 1]
    hit = _lru_hits(previous, ways)
    # a signature's first access misses, so the running maximum stays within its group
    latest_miss = np.maximum.accumulate(np.where(hit[by_signature], -1, np.arange(len(heads))))
    head_owners = np.empty(len(heads), dtype=np.int64)
    head_owners[by_signature] = order[heads[by_signature[latest_miss]]]
    result = np.empty(len(signatures), dtype=np.int64)
    result[order] = head_owners[np.cumsum(head) - 1]
    return result


def _lru_hits(previous: np.ndarray, ways: int) -> np.ndarray:
    """Hits of an access stream sorted by set (each set's accesses in time order), previous[i]
    the position of the same signature's previous access (-1: none).

    An LRU set holds the `ways` most recently used distinct signatures, so access i hits iff
    fewer than `ways` distinct signatures came between previous[i] and i. Those are counted by
    their last accesses before i: the positions j in between whose next access is at i or
    later. Each window is scanned backwards from i in blocks of doubling width (last accesses
    come first, so most misses are settled by the first `ways` positions); an access leaves
    the scan once `ways` distinct signatures are found (a miss) or its window is exhausted."""
    count = len(previous)
    gap = np.arange(count) - previous - 1  # window length
    seen = previous >= 0
    hit = seen & (gap < ways)
    pending = np.flatnonzero(seen & (gap >= ways))
    following = np.full(count + 1, count, dtype=np.int64)  # next access; none: count
    following[previous[seen]] = np.flatnonzero(seen)
    following[count] = -1  # position `count` stands for "outside the window": never counted
    distinct = np.zeros(len(pending), dtype=np.int64)
    scanned, width = 0, ways
    while len(pending):
        length = gap[pending]
        offsets = np.arange(scanned + 1, scanned + width + 1)[:, None]
        window = pending - offsets  # (width, accesses): reduced along the long axis
        if scanned + width > length.min():
            window[offsets > length] = count
        distinct += np.count_nonzero(following[window] >= pending, axis=0)
        scanned += width
        width *= 2
        miss, exhausted = distinct >= ways, length <= scanned
        hit[pending[exhausted & ~miss]] = True
        left = ~(miss | exhausted)
        pending, distinct = pending[left], distinct[left]
    return hit

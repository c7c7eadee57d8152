"""MCACHE models: which input vectors of a mini-batch hit the cache, and whose output they reuse.

Vectors are looked up in the order the array consumes them (the rows of the FWD GEMM). A hit
reuses the output of the vector that put the entry in the cache (its "owner"); the cache is
flushed at every weight update, i.e. per mini-batch. Models:

- unbounded: every repeat of a signature in the mini-batch hits its first occurrence;
- direct: `entries` sets of one way, indexed by signature mod entries (its low bits);
- set-associative: entries / ways sets of `ways` ways, LRU replacement.

`owners` is the fast implementation (compiled loops with flat arrays); `reference_owners` is the
plain one it must equal.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numba
import numpy as np

from backend.training.compiled import compiled


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
    signatures = np.ascontiguousarray(signatures, dtype=np.int64)
    if cache.kind == "unbounded":
        return _first_occurrences(signatures)
    return _lru_owners(signatures, cache.sets, cache.associativity)


@compiled()
def _first_occurrences(signatures: np.ndarray) -> np.ndarray:
    """The unbounded model: a hash table from signature to the first vector that had it (open
    addressing, linear probing), doubled when half full. Sized by the distinct signatures, not
    the vectors, it stays in the fastest caches."""
    result = np.empty(len(signatures), dtype=np.int64)
    log_capacity = 9  # 512 slots to start with
    empty = np.empty(0, dtype=np.int64)
    keys, firsts = _rehashed(empty, empty, log_capacity)
    done = _insert(signatures, 0, keys, firsts, log_capacity, result)
    while done < len(signatures):
        log_capacity += 1
        keys, firsts = _rehashed(keys, firsts, log_capacity)
        done = _insert(signatures, done, keys, firsts, log_capacity, result)
    return result


@compiled()
def _insert(
    signatures: np.ndarray,
    start: int,
    keys: np.ndarray,
    firsts: np.ndarray,
    log_capacity: int,
    result: np.ndarray,
) -> int:
    """Look signatures up from `start` on, adding the new ones, until the end or until the
    table is half full; returns where it stopped."""
    stored = np.count_nonzero(firsts >= 0)
    for i in range(start, len(signatures)):
        if 2 * stored >= len(firsts):
            return i
        signature = signatures[i]
        slot = _slot(signature, keys, firsts, log_capacity)
        if firsts[slot] < 0:
            keys[slot], firsts[slot] = signature, i
            stored += 1
        result[i] = firsts[slot]
    return len(signatures)


@numba.njit(inline="always")
def _slot(signature: int, keys: np.ndarray, firsts: np.ndarray, log_capacity: int) -> int:
    """The slot holding `signature`, or the empty one where it goes. Fibonacci hashing: the
    top bits of signature * 2^64 / golden ratio."""
    slot = (np.uint64(signature) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - log_capacity)
    while firsts[slot] >= 0 and keys[slot] != signature:
        slot = (slot + np.uint64(1)) & np.uint64(len(firsts) - 1)
    return slot


@compiled()
def _rehashed(
    keys: np.ndarray, firsts: np.ndarray, log_capacity: int
) -> tuple[np.ndarray, np.ndarray]:
    """The table's entries in a new table of 2^log_capacity slots (-1: empty)."""
    new_keys = np.empty(1 << log_capacity, dtype=np.int64)
    new_firsts = np.full(1 << log_capacity, -1, dtype=np.int64)
    for slot in range(len(firsts)):
        if firsts[slot] >= 0:
            target = _slot(keys[slot], new_keys, new_firsts, log_capacity)
            new_keys[target], new_firsts[target] = keys[slot], firsts[slot]
    return new_keys, new_firsts


@compiled()
def _lru_owners(signatures: np.ndarray, sets: int, ways: int) -> np.ndarray:
    """Direct and set-associative models. Set r holds entries r * ways ... (signature, owner)
    ordered by last use, most recent first: an access moves its entry to the front, and a miss
    in a full set drops the last one, the least recently used."""
    tags = np.empty(sets * ways, dtype=np.int64)
    entry_owners = np.empty(sets * ways, dtype=np.int64)
    filled = np.zeros(sets, dtype=np.int64)
    low_bits = sets & (sets - 1) == 0  # a power of two: the set is the low bits, no division
    result = np.empty(len(signatures), dtype=np.int64)
    for i, signature in enumerate(signatures):
        # in [0, sets) for negative signatures too, as Python's %
        row = signature & (sets - 1) if low_bits else signature % sets
        first, used = row * ways, filled[row]
        way = 0
        while way < used and tags[first + way] != signature:
            way += 1
        if way < used:
            owner = entry_owners[first + way]
        else:
            owner = i
            if used < ways:
                filled[row] = used + 1
            else:
                way = ways - 1
        for w in range(first + way, first, -1):
            tags[w], entry_owners[w] = tags[w - 1], entry_owners[w - 1]
        tags[first], entry_owners[first] = signature, owner
        result[i] = owner
    return result

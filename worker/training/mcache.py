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

import numpy as np

from worker.training.compiled import compiled


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
    """The unbounded model: a hash table (open addressing, linear probing) from signature to the
    first vector that had it."""
    log_capacity = 4
    while 1 << log_capacity < 2 * len(signatures):  # at most half full: probes stay short
        log_capacity += 1
    capacity = 1 << log_capacity
    shift = np.uint64(64 - log_capacity)
    keys = np.empty(capacity, dtype=np.int64)
    firsts = np.full(capacity, -1, dtype=np.int64)  # -1: empty slot
    result = np.empty(len(signatures), dtype=np.int64)
    for i, signature in enumerate(signatures):
        # Fibonacci hashing: the top bits of signature * 2^64 / golden ratio
        slot = (np.uint64(signature) * np.uint64(0x9E3779B97F4A7C15)) >> shift
        while firsts[slot] >= 0 and keys[slot] != signature:
            slot = (slot + np.uint64(1)) & np.uint64(capacity - 1)
        if firsts[slot] < 0:
            keys[slot], firsts[slot] = signature, i
        result[i] = firsts[slot]
    return result


@compiled()
def _lru_owners(signatures: np.ndarray, sets: int, ways: int) -> np.ndarray:
    """Direct and set-associative models. Way w of set r is entry r * ways + w: a signature,
    its owner and the time of its last use; a miss in a full set replaces the least recently
    used entry."""
    tags = np.empty(sets * ways, dtype=np.int64)
    entry_owners = np.empty(sets * ways, dtype=np.int64)
    last_use = np.empty(sets * ways, dtype=np.int64)
    filled = np.zeros(sets, dtype=np.int64)
    low_bits = sets & (sets - 1) == 0  # a power of two: the set is the low bits, no division
    result = np.empty(len(signatures), dtype=np.int64)
    entry = 0
    for i, signature in enumerate(signatures):
        if i and signature == signatures[i - 1]:  # common (flat image regions): `entry` is it
            result[i] = entry_owners[entry]
            last_use[entry] = i
            continue
        # in [0, sets) for negative signatures too, as Python's %
        row = signature & (sets - 1) if low_bits else signature % sets
        first, used = row * ways, filled[row]
        entry = first
        while entry < first + used and tags[entry] != signature:
            entry += 1
        if entry < first + used:
            result[i] = entry_owners[entry]
        else:
            if used < ways:
                filled[row] += 1
            else:
                entry = first
                for candidate in range(first + 1, first + ways):
                    if last_use[candidate] < last_use[entry]:
                        entry = candidate
            tags[entry], entry_owners[entry] = signature, i
            result[i] = i
        last_use[entry] = i
    return result

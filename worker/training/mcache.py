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
    set's previous one (a hit on the most recently used entry, which changes nothing), and run
    LRU on the rest."""
    count = len(signatures)
    set_of = np.mod(signatures, sets)
    order = np.argsort(set_of, kind="stable")
    sorted_sets, sorted_signatures = set_of[order], signatures[order]
    repeat = np.r_[
        False,
        (sorted_sets[1:] == sorted_sets[:-1]) & (sorted_signatures[1:] == sorted_signatures[:-1]),
    ]
    heads = np.flatnonzero(~repeat)
    head_owners = _lru_heads(
        sorted_sets[heads].tolist(), sorted_signatures[heads].tolist(), order[heads].tolist(), ways
    )
    head_of_access = np.cumsum(~repeat) - 1
    result = np.empty(count, dtype=np.int64)
    result[order] = np.asarray(head_owners, dtype=np.int64)[head_of_access]
    return result


def _lru_heads(sets: list[int], signatures: list[int], vectors: list[int], ways: int) -> list[int]:
    """LRU over accesses sorted by set (a plain loop: most sets see few accesses)."""
    result: list[int] = []
    entries: OrderedDict[int, int] = OrderedDict()
    current_set = -1
    for set_index, signature, vector in zip(sets, signatures, vectors, strict=True):
        if set_index != current_set:
            entries, current_set = OrderedDict(), set_index
        owner = entries.get(signature)
        if owner is None:
            if len(entries) == ways:
                entries.popitem(last=False)
            entries[signature] = owner = vector
        else:
            entries.move_to_end(signature)
        result.append(owner)
    return result

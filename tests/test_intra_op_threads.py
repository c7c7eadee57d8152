"""A worker's intra-op thread count: OMP_NUM_THREADS if set, else at most 2."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

from worker.intra_op_threads import configure_threads


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_omp_num_threads_is_taken_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    configure_threads()
    assert torch.get_num_threads() == 1


def test_unset_means_at_most_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(1)
    configure_threads()
    assert torch.get_num_threads() == min(2, os.cpu_count() or 1)

"""Errors the training engine raises to the job runner."""

from __future__ import annotations


class TrainingCancelled(Exception):
    """The job runner asked the training to stop; raised between two mini-batches."""


class DatasetUnavailable(ValueError):
    """A data set's files are not on this machine; the message says how to install them."""

    def __init__(self, dataset: str, detail: str, install_hint: str) -> None:
        super().__init__(f"dataset '{dataset}' is not available: {detail}. {install_hint}")
        self.dataset = dataset
        self.install_hint = install_hint

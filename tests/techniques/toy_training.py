"""The toy technique's training hook: it keeps its parameters and changes nothing."""

from __future__ import annotations

from pydantic import BaseModel

from worker.training.technique import Technique


class Toy(Technique):
    name = "toy"

    def __init__(self, params: BaseModel) -> None:
        self.params = params

"""The baseline's parameters: none but its name."""

from __future__ import annotations

from typing import Literal

from backend.specs.training import Spec


class BaselineParams(Spec):
    """Plain training: every pass dense, nothing skipped."""

    name: Literal["baseline"] = "baseline"

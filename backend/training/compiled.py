"""Compiled loops: `numba.njit` with numba's on-disk cache of the machine code where it can write.

numba keeps the cache beside the source (`__pycache__`) or, when the package directory is
read-only, in the user's cache directory (`~/.cache/numba`); `NUMBA_CACHE_DIR` overrides both.
With none of them writable (a service user without a home), `cache=True` fails at import, so
such a process compiles its kernels itself instead: a few seconds, once per process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba


def compiled(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: `numba.njit(cache=True, **options)`, uncached if no cache can be written."""

    def decorate(function: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(**options)(function)

    return decorate

"""Unpickle data files that hold only numpy arrays, lists, dicts and strings.

MNIST's and CIFAR-10's distributions are pickles. A plain `pickle.load` would run any code a
tampered file names, so only the few constructors numpy arrays need are allowed.
"""

from __future__ import annotations

import pickle
from typing import IO, Any

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(module, name)


def load_arrays(stream: IO[bytes], encoding: str = "latin1") -> Any:
    """Load one pickled object made of numpy arrays and plain containers."""
    return _ArrayUnpickler(stream, encoding=encoding).load()

"""Read the idx format of MNIST-like data sets (plain or gzip-compressed).

An idx file is a 4-byte magic number (two zero bytes, a type code, the number of dimensions),
one big-endian 32-bit size per dimension, then the values in C order.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_TYPE_CODES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}


def _open(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_idx(path: Path) -> np.ndarray:
    """The array stored in one idx file."""
    data = _open(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _TYPE_CODES:
        raise ValueError(f"{path.name} is not an idx file")
    dims = data[3]
    header = 4 + 4 * dims
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    array = np.frombuffer(data, dtype=_TYPE_CODES[data[2]], offset=header)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path.name}: header says {shape} but holds {array.size} values")
    return array.reshape(shape)


def read_idx_shape(path: Path) -> tuple[int, ...]:
    """The shape an idx file declares, read from its header only."""
    data = _open(path)
    dims = data[3]
    return tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write an unsigned-byte array as idx (gzip-compressed when the name ends in .gz)."""
    values = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, values.ndim]) + b"".join(
        int(size).to_bytes(4, "big") for size in values.shape
    )
    payload = header + values.tobytes()
    path.write_bytes(gzip.compress(payload) if path.suffix == ".gz" else payload)

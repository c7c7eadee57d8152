"""How many intra-op threads a worker process trains with.

Model: OMP_NUM_THREADS if set (a deployment's own choice), else at most 2: Orrery trains small
models on small batches, and on a machine busier than its cores 1 avoids threads spinning while
they wait for a descheduled partner. The training loop (backend/training/engine.py) does not
choose: it trains with the count the process is set to and records it in the training's
environment. Open choice: set per task, not once per process, so a task always starts from the
policy whatever ran in the process before it.
"""

from __future__ import annotations

import os

import torch


def configure_threads() -> None:
    """Set this process's intra-op thread count by the policy above."""
    configured = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(configured) if configured.isdigit() else min(2, os.cpu_count() or 1)
    torch.set_num_threads(max(1, threads))

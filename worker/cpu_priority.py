"""The worker's CPU priority: on a host it shares with the API, trainings yield the cores.

A training takes every cycle it is given, for minutes; a request takes a few milliseconds and a
person waits on it. When both run on one machine (`orrery serve` with its worker, or compose's
services on one host), the scheduler shares the cores equally by default, so every page waits
behind the training. A worker at niceness 10 has about a tenth of a default process's share
while both want the CPU, and all of it when the API is idle: trainings finish as fast as
before on an idle service, and requests keep their cores on a busy one. Measured with
`benchmarks/api_load.py --mix --writer --writer-nice 0,10` (its docstring has the figures).
"""

from __future__ import annotations

import os


def yield_cpu(niceness: int) -> int:
    """Make this process (and the processes it starts after) at least this nice; an operator
    who started it nicer keeps that. Returns the niceness it has now."""
    if niceness > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    return os.getpriority(os.PRIO_PROCESS, 0)

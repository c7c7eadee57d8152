"""Hardware design searches as a service: recording them, splitting them into chunks that
workers evaluate under leases, merging, progress, cancel, and what a front design becomes.

- `records`: the search's rows, the trainings it evaluates, its progress, cancelling it;
- `chunks`: claiming a chunk, holding its lease, storing its result once, taking back expired
  leases;
- `sending`: starting a search; its chunks are sent by the fair dispatch, with trainings;
- `designs`: a front design turned into runs, or saved as the user's own accelerator.

The evaluation itself (design enumeration, fronts, sample, merge) is the simulator core's
(backend/sim/design_search.py); only the worker calls it (worker/search_jobs.py). Nothing here
imports the worker or torch: the API uses this package.
"""

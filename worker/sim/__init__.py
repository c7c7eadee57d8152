"""`python -m worker.sim` is kept as an alias of `python -m backend.sim`, the simulator's own
command (the simulator moved into the science core, backend/sim)."""

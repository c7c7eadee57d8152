"""The built-in training-acceleration techniques, one folder each (see `entry.py` for what a
folder holds). Each is registered by an entry point in the group `orrery.techniques`
(pyproject.toml), exactly as a technique from another package is."""

"""The science core reads no settings and no environment.

The specs (backend/specs), the techniques (backend/techniques), the training (backend/training)
and the simulator (backend/sim) take what they need as arguments, so a training or a simulation
depends on its inputs alone and runs the same in the worker, a benchmark or a test. Checked two
ways: importing every module of those packages in a fresh interpreter loads no
`backend.settings`, and no module's source reads `os.environ`, `os.environb` or `os.getenv`.
A package's `__main__.py` (`python -m backend.sim`) is a command-line program around the core,
like the worker: it may read its terminal's environment (COLUMNS), so the scan leaves it out.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
SCIENCE_CORE = ("backend.specs", "backend.techniques", "backend.training", "backend.sim")
ENVIRONMENT_READERS = {"environ", "environb", "getenv"}

IMPORT_EVERY_MODULE = """
import importlib, importlib.abc, json, pkgutil, sys

class NameWhoImportsSettings(importlib.abc.MetaPathFinder):
    chain = None

    def find_spec(self, name, path, target=None):
        if name == "backend.settings" and NameWhoImportsSettings.chain is None:
            chain, frame = [], sys._getframe(1)
            while frame is not None:
                module = frame.f_globals.get("__name__", "")
                if module.startswith(("backend.", "worker.")) and module not in chain:
                    chain.append(module)
                frame = frame.f_back
            NameWhoImportsSettings.chain = chain
        return None

sys.meta_path.insert(0, NameWhoImportsSettings())
modules = []
for name in PACKAGES:
    package = importlib.import_module(name)
    modules.append(name)
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(info.name)
        modules.append(info.name)
print(json.dumps({
    "modules": modules,
    "settings_loaded": "backend.settings" in sys.modules,
    "imported_by": NameWhoImportsSettings.chain,
}))
"""


def test_importing_the_science_core_loads_no_settings() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    script = IMPORT_EVERY_MODULE.replace("PACKAGES", repr(SCIENCE_CORE))
    answer = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(answer.stdout.splitlines()[-1])
    assert "backend.training.engine" in report["modules"]
    assert "backend.sim.simulate" in report["modules"]
    assert "backend.techniques.adagp.training" in report["modules"]
    assert not report["settings_loaded"], (
        "backend.settings was imported by (innermost first): " + " <- ".join(report["imported_by"])
    )


def _environment_reads(source: str, name: str) -> list[str]:
    """Each place in one module's source that reads the process environment through `os`,
    as "name:line: what", in source order."""
    tree = ast.parse(source, filename=name)
    os_names = {"os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {alias.asname or "os" for alias in node.names if alias.name == "os"}
    reads: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            reads += [
                (node.lineno, f"from os import {alias.name}")
                for alias in node.names
                if alias.name in ENVIRONMENT_READERS
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_READERS
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ):
            reads.append((node.lineno, f"os.{node.attr}"))
    return [f"{name}:{line}: {what}" for line, what in sorted(reads)]


def test_no_science_module_reads_the_environment() -> None:
    sources = [
        path
        for package in SCIENCE_CORE
        for path in sorted((REPOSITORY / package.replace(".", "/")).rglob("*.py"))
        if path.name != "__main__.py"
    ]
    assert len(sources) > 30
    reads = [
        read
        for path in sources
        for read in _environment_reads(
            path.read_text(encoding="utf-8"), str(path.relative_to(REPOSITORY))
        )
    ]
    assert reads == []


def test_the_scan_sees_every_way_of_reading() -> None:
    source = (
        "import os\nimport os as system\nfrom os import getenv\n"
        "a = os.environ['A']\nb = system.getenv('B')\nc = os.environb\nd = os.path.sep\n"
    )
    assert _environment_reads(source, "reader.py") == [
        "reader.py:3: from os import getenv",
        "reader.py:4: os.environ",
        "reader.py:5: os.getenv",
        "reader.py:6: os.environb",
    ]

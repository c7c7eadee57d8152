"""Imports run one way: `worker/` (the Celery process) may import `backend/`, never the reverse,
and the science core (specs, techniques, training, simulator) imports nothing of the service.

Checked on the source with `ast`, so an import inside a function, a method or an
`if TYPE_CHECKING:` block counts as much as one at the top of a module. Relative imports are
resolved against the importing module's package before they are judged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
SCIENCE_CORE = ("backend.specs", "backend.techniques", "backend.training", "backend.sim")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPOSITORY).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement anywhere in one module's source;
    `package` is the package relative imports start from."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def _modules_under(root: str) -> list[Path]:
    return sorted((REPOSITORY / root.replace(".", "/")).rglob("*.py"))


def _offending(roots: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    offences = []
    for root in roots:
        for path in _modules_under(root):
            name = _module_name(path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for line, module in imported_modules(path.read_text(), package):
                if module in forbidden or module.startswith(tuple(f + "." for f in forbidden)):
                    offences.append(f"{path.relative_to(REPOSITORY)}:{line} imports {module}")
    return offences


def test_backend_never_imports_the_worker() -> None:
    assert _offending(("backend",), ("worker",)) == []


def test_the_science_core_imports_nothing_of_the_service() -> None:
    core_and_third_party = set(SCIENCE_CORE)
    service = tuple(
        _module_name(path)
        for path in sorted((REPOSITORY / "backend").iterdir())
        if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py"
        if _module_name(path) not in core_and_third_party | {"backend"}
    )
    assert "backend.api" in service and "backend.settings" in service
    assert _offending(SCIENCE_CORE, service) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    from worker.jobs import run\n", "worker.jobs"),
        ("if True:\n    import worker.tasks as t\n", "worker.tasks"),
        ("from ..worker import x\n", "backend.worker"),
        ("from . import area\n", "backend.sim"),
    ],
)
def test_the_scan_sees_imports_in_any_block(source: str, expected: str) -> None:
    assert expected in [module for _, module in imported_modules(source, "backend.sim")]

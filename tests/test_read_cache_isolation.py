"""The read cache is known only to itself and to the routes that declare their cached reads:
authentication (backend/auth, api/security.py), delivery (backend/delivery, the code workers
write with) and the worker process (worker/) neither import nor touch it. Writes reach the
cache through the database's triggers (db/change_log.py), whoever makes them; topics come from
there and from the routes' own `cached_read` declarations.

Checked on the source with `ast`: an import anywhere in a module (inside a function too), of a
cache module or of a name from one, and any use of the app's cache attributes, by name or as a
string.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
UNAWARE = ("backend/auth", "backend/delivery", "backend/api/security.py", "worker")
CACHE_MODULES = (
    "backend.api.read_cache",
    "backend.api.cached_reads",
    "backend.api.marker_reader",
    "backend.db.change_log",
)
CACHE_NAMES = {"read_cache", "marker_reader", "cached_reads", "change_log"}


def cache_uses(source: str, package: str) -> list[tuple[int, str]]:
    """(line, what) of every import of a cache module and every use of a cache name in one
    module's source; `package` is the package relative imports start from."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        imported: list[str] = []
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            imported = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute) and node.attr in CACHE_NAMES:
            found.append((node.lineno, f"uses .{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in CACHE_NAMES:
            found.append((node.lineno, f"uses {node.id}"))
        elif isinstance(node, ast.Constant) and node.value in CACHE_NAMES:
            found.append((node.lineno, f"names {node.value!r}"))
        for module in imported:
            if module in CACHE_MODULES or module.startswith(tuple(m + "." for m in CACHE_MODULES)):
                found.append((node.lineno, f"imports {module}"))
    return found


def modules(root: str) -> list[Path]:
    path = REPOSITORY / root
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def package_of(path: Path) -> str:
    """The package a module's relative imports start from (a package's __init__: itself)."""
    parts = path.relative_to(REPOSITORY).with_suffix("").parts
    return ".".join(parts[:-1])


def test_authentication_delivery_and_workers_know_nothing_of_the_read_cache() -> None:
    checked = [path for root in UNAWARE for path in modules(root)]
    assert len(checked) > 10, "the modules to check were found"
    offences = [
        f"{path.relative_to(REPOSITORY)}:{line} {what}"
        for path in checked
        for line, what in cache_uses(path.read_text(), package_of(path))
    ]
    assert offences == []


def test_the_check_finds_each_kind_of_use() -> None:
    source = """
from backend.api.cached_reads import cached_read
from ..db import change_log
import backend.api.marker_reader
def f(request):
    from backend.api import read_cache
    request.app.state.read_cache.answer()
    getattr(request.app.state, "marker_reader")
"""
    found = cache_uses(source, "backend.auth")
    assert {line for line, _ in found} == {2, 3, 4, 6, 7, 8}
    assert cache_uses("from backend.db.models import User\nuser.cache = 1\n", "backend") == []

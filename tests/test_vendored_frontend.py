"""The browser libraries copied into frontend/vendor/ are the files their README names, byte for
byte: each row's sha256 matches, and every vendored script has a row."""

from __future__ import annotations

import hashlib
import re

from tests.conftest import ROOT

VENDOR = ROOT / "frontend" / "vendor"
ROW = re.compile(r"^\| `(?P<file>[^`]+)` \|.*\| `(?P<sha256>[0-9a-f]{64})` \|$", re.MULTILINE)


def test_vendored_files_match_their_recorded_sha256() -> None:
    rows = {m["file"]: m["sha256"] for m in ROW.finditer((VENDOR / "README.md").read_text())}
    scripts = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*.js")}
    assert scripts and scripts == set(rows), (scripts, rows)
    for name, sha256 in rows.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == sha256, name

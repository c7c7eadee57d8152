"""One table of numbers, written by the CLI's formatter (backend/numbers.py) and the dashboard's
(frontend/js/format.js, run by node, or by Chromium where node is missing): both must write
every case as the table says, and agree on thousands of random ones."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from backend.numbers import format_estimate, format_value
from tests.conftest import ROOT

# (value, unit, signed) -> text
VALUES: list[tuple[Any, str, bool, str]] = [
    (None, "", False, "–"),
    (float("nan"), "pJ", False, "–"),
    (0, "", False, "0"),
    (1024, "", False, "1,024"),
    (171034.958, "", False, "171,035"),
    (0.123456, "", False, "0.123"),
    (5.47e-7, "", False, "5.47e-7"),
    (-5.47e-7, "", False, "-5.47e-7"),
    (2.36e15, "", False, "2.36e15"),
    (0.125, "", False, "0.125"),
    (0.0125, "", False, "0.0125"),
    (0.00125, "", False, "0.00125"),
    (9.996, "", False, "10.0"),
    (-0.0004, "", True, "-4.00e-4"),
    (0.9984, "×", False, "0.998×"),
    (1.0, "×", False, "1.00×"),
    (12.345, "×", False, "12.3×"),
    (1.2345e3, "×", False, "1,235×"),
    (0.9734, "%", False, "97.3%"),
    (1.0, "%", False, "100%"),
    (0.11, "%", False, "11.0%"),
    (0.0052, "pt", False, "+0.520 pt"),
    (-0.0123, "pt", False, "-1.23 pt"),
    (0.0, "pt", False, "0 pt"),
    (171_034_958.0, "pJ", False, "171 µJ"),
    (159_991_000.0, "pJ", False, "160 µJ"),
    (2.36e13, "pJ", False, "23.6 J"),
    (999_960.0, "pJ", False, "1.00 µJ"),
    (512.0, "pJ", False, "512 pJ"),
    (0.0, "pJ", False, "0 pJ"),
    (123_298.651 * 2**20, "bytes", False, "120 GiB"),
    (3 * 2**20, "bytes", False, "3.00 MiB"),
    (1000, "bytes", False, "1,000 B"),
    (0.0123, "s", False, "12.3 ms"),
    (2.46e-4, "s", False, "246 µs"),
    (0.99996, "s", False, "1.00 s"),
    (90, "s", False, "1.50 min"),
    (7200, "s", False, "2.00 h"),
    (0.0, "s", False, "0 s"),
    (3e-10, "s", False, "0.300 ns"),
    (999, "cycles", False, "999 cycles"),
    (2_361_234, "cycles", False, "2.36 M cycles"),
    (1234, "MACs", False, "1.23 k MACs"),
    (8.36, "mm²", False, "8.36 mm²"),
    (0.12345, "mm²", False, "0.123 mm²"),
    (16, "", False, "16"),
]
# (mean, half, unit, signed) -> text
ESTIMATES: list[tuple[Any, Any, str, bool, str]] = [
    (171_034_958.0, 5_470_000.0, "pJ", False, "171.0 ± 5.5 µJ"),
    (0.9731, 0.0052, "%", False, "97.31 ± 0.52%"),
    (1.2345, 0.0123, "×", False, "1.234 ± 0.012×"),
    (0.998, None, "×", False, "0.998×"),
    (0.998, 0.0, "×", False, "0.998×"),
    (0.0052, 0.0031, "pt", False, "+0.52 ± 0.31 pt"),
    (-0.0052, 0.0031, "pt", False, "-0.52 ± 0.31 pt"),
    (0.0123, 0.00047, "s", False, "12.30 ± 0.47 ms"),
    (2_361_234, 12_345, "cycles", False, "2.361 ± 0.012 M cycles"),
    (2.1e6, 3.3e4, "pJ·s", False, "2.100 ± 0.033 µJ·s"),
    (123_456.7, 2_345.6, "", False, "123,457 ± 2,346"),  # integer digits stay
    (0.123_456_7, 0.002_355_6, "", False, "0.1235 ± 0.0024"),
    (5.0e-7, 1.0e-8, "", False, "5.00e-7 ± 1.0e-8"),
    (171.034958, 5.47e-7, "", False, "171.035 ± 5.5e-7"),
    (0.01, 3.0, "", False, "0.0 ± 3.0"),
    (3.0, 0.25, "", True, "+3.00 ± 0.25"),
    (None, 1.0, "pJ", False, "–"),
    (8.3612, 0.0, "mm²", False, "8.36 mm²"),
    (0.2, 8.3e-17, "%", False, "20.0%"),  # seeds that measured the same value: rounding only
]


def test_python_writes_the_table() -> None:
    for value, unit, signed, text in VALUES:
        assert format_value(value, unit, signed) == text, (value, unit)
    for mean, half, unit, signed, text in ESTIMATES:
        assert format_estimate(mean, half, unit, signed) == text, (mean, half, unit)


def _random_cases(count: int) -> list[dict[str, Any]]:
    """Values over twenty decades and both signs, exact ties among them (x.5 at the rounding
    place), in every unit."""
    rng = random.Random(27)
    units = ["", "×", "%", "pt", "pJ", "pJ·s", "bytes", "s", "cycles", "MACs", "words", "mm²"]
    cases = []
    for _ in range(count):
        if rng.random() < 0.2:
            value = rng.choice([1, -1]) * rng.randrange(1, 2000) / rng.choice([8, 16, 64, 1024])
        else:
            value = rng.choice([1, -1]) * 10 ** rng.uniform(-10, 10)
        half = None if rng.random() < 0.2 else abs(value) * 10 ** rng.uniform(-8, 0.5)
        cases.append(
            {"value": value, "half": half, "unit": rng.choice(units), "signed": rng.random() < 0.3}
        )
    return cases


def _javascript_script(cases: list[dict[str, Any]]) -> str:
    return (
        "const cases = " + json.dumps(cases) + ";\n"
        "const out = cases.map((c) => c.estimate\n"
        "  ? formatEstimate(c.value, c.half, c.unit, c.signed)\n"
        "  : formatValue(c.value, c.unit, c.signed));\n"
    )


def _run_javascript(cases: list[dict[str, Any]], tmp_path: Path) -> list[str]:
    """frontend/js/format.js's answers to `cases`: through node where it is installed, else in
    headless Chromium."""
    source = (ROOT / "frontend" / "js" / "format.js").read_text()
    node = shutil.which("node") or shutil.which("nodejs")
    if node:
        module = tmp_path / "format.mjs"
        module.write_text(source)
        runner = tmp_path / "run.mjs"
        runner.write_text(
            "import { formatEstimate, formatValue } from './format.mjs';\n"
            + _javascript_script(cases)
            + "process.stdout.write(JSON.stringify(out));\n"
        )
        done = subprocess.run(
            [node, str(runner)], capture_output=True, text=True, timeout=60, check=True
        )
        return json.loads(done.stdout)
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        exported = source.replace("export function", "function").replace("export const", "const")
        answer = page.evaluate(
            "(code) => (new Function(code))()", exported + _javascript_script(cases) + "return out;"
        )
        browser.close()
        return answer


def test_javascript_writes_the_table_and_agrees_with_python(tmp_path: Path) -> None:
    table = [
        {"value": v, "half": None, "unit": u, "signed": s, "estimate": False}
        for v, u, s, _ in VALUES
    ] + [
        {"value": m, "half": h, "unit": u, "signed": s, "estimate": True}
        for m, h, u, s, _ in ESTIMATES
    ]
    # JSON has no NaN: the JavaScript side gets null, which is missing too
    table = [
        {**case, "value": None if case["value"] != case["value"] else case["value"]}
        for case in table
    ]
    expected = [text for *_, text in VALUES] + [text for *_, text in ESTIMATES]
    randoms = [{**case, "estimate": case["half"] is not None} for case in _random_cases(4000)]
    written = _run_javascript(table + randoms, tmp_path)
    assert written[: len(table)] == expected
    python = [
        format_estimate(c["value"], c["half"], c["unit"], c["signed"])
        if c["estimate"]
        else format_value(c["value"], c["unit"], c["signed"])
        for c in randoms
    ]
    mismatches = [
        (case, py, js)
        for case, py, js in zip(randoms, python, written[len(table) :], strict=True)
        if py != js
    ]
    assert mismatches == [], mismatches[:5]


@pytest.mark.parametrize("value", [0.5, 2.5, 0.125, 1.0e-3 * 1.5, 1234.5])
def test_exact_ties_round_away_from_zero(value: float) -> None:
    """Binary-exact halves round up, as JavaScript's toFixed does (Python's own format
    rounds them to even)."""
    assert format_value(value) == format_value(value + 1e-12 * value)
    assert format_value(-value) == "-" + format_value(value)


@pytest.mark.parametrize(
    ("zone", "written"),
    [("UTC", "2026-12-04 22:41:07"), ("Asia/Kolkata", "2026-12-05 04:11:07")],
)
def test_moments_are_written_in_the_readers_zone_the_same_in_every_locale(
    zone: str, written: str, tmp_path: Path
) -> None:
    """Pages write dates as "YYYY-MM-DD HH:MM:SS" in the reader's time zone, whatever the
    browser's locale (they were `toLocaleString()`: "12/4/2026, 10:41:07 PM" in en-US)."""
    source = (ROOT / "frontend" / "js" / "format.js").read_text()
    moments = ["2026-12-04T22:41:07.612000+00:00", None, "not a date"]
    node = shutil.which("node") or shutil.which("nodejs")
    if node:
        (tmp_path / "format.mjs").write_text(source)
        runner = tmp_path / "when.mjs"
        runner.write_text(
            "import { formatWhen } from './format.mjs';\n"
            f"process.stdout.write(JSON.stringify({json.dumps(moments)}.map(formatWhen)));\n"
        )
        done = subprocess.run(
            [node, str(runner)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "TZ": zone, "LANG": "en_US.UTF-8"},
        )
        answers = json.loads(done.stdout)
    else:
        from playwright.sync_api import sync_playwright

        from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page(timezone_id=zone, locale="en-US")
            exported = source.replace("export function", "function").replace(
                "export const", "const"
            )
            answers = page.evaluate(
                "([code, moments]) => (new Function('moments', code))(moments)",
                [exported + "return moments.map(formatWhen);", moments],
            )
            browser.close()
    assert answers == [written, "–", "–"]

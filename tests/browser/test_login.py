"""Through the browser with accounts on: sent to the login page, a wrong password, logging in,
submitting through the form (CSRF token and all), logging out, and the rate-limit message."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import ConsoleLog, Server, stop_serve
from tests.conftest import ORRERY_BIN, ROOT, free_port, orrery_env, wait_for_http

pytestmark = pytest.mark.browser

EMAIL = "ada@example.org"
PASSWORD = "correct horse battery staple"
MAX_FAILURES = 3
# Chromium logs every 4xx answer: the 401s that send a visitor to /login and a wrong password.
EXPECTED = re.compile(r"the server responded with a status of (401|429)")


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`orrery serve` on embedded SQLite with accounts on, and one user created by the CLI."""
    data_dir = tmp_path_factory.mktemp("orrery-accounts")
    env = orrery_env(
        ORRERY_DATA_DIR=str(data_dir),
        ORRERY_SINGLE_USER="false",
        ORRERY_WORKER_CONCURRENCY="1",
        ORRERY_LOGIN_MAX_FAILURES=str(MAX_FAILURES),
    )
    created = subprocess.run(
        [ORRERY_BIN, "user", "create", "--email", EMAIL, "--name", "Ada", "--password-stdin"],
        input=f"{PASSWORD}\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    port = free_port()
    log = data_dir / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [ORRERY_BIN, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/api/v1/health", timeout=90, process=process)
        yield Server(url=url, process=process, log=log, data_dir=data_dir)
    finally:
        stop_serve(process)


def log_in(page: Page, email: str, password: str) -> None:
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def unexpected(console: ConsoleLog) -> list[str]:
    return [e for e in console.errors if not EXPECTED.search(e)]


def test_login_submit_logout(accounts_server: Server, browser: Browser, screenshots: Path) -> None:
    server = accounts_server
    console = ConsoleLog()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console.watch(page)

    # 1. Without a session, the runs page sends the visitor to the login page.
    page.goto(f"{server.url}/?status=done")
    page.wait_for_url(re.compile(r"/login\?next=%2F%3Fstatus%3Ddone$"))
    assert page.get_by_role("heading", name="Log in").is_visible()
    page.screenshot(path=screenshots / "10-login.png", full_page=True)

    # 2. A wrong password: a clear message, still on the login page.
    log_in(page, EMAIL, "not the password")
    alert = page.locator("#login-message")
    page.wait_for_function(
        "() => /wrong email or password/i.test(document.getElementById('login-message')"
        ".textContent)"
    )
    assert "/login" in page.url and page.get_by_label("Password").input_value() == ""

    # 3. The right password: back where the visitor came from, the header shows who it is.
    log_in(page, EMAIL, PASSWORD)
    page.wait_for_url(re.compile(r"/\?status=done$"))
    session = page.locator("header.top .session")
    session.get_by_text(EMAIL).wait_for()
    assert "Logged in as" in session.inner_text()
    assert session.get_by_role("button", name="Log out").is_visible()
    page.locator("#run-table").wait_for()
    page.screenshot(path=screenshots / "11-logged-in.png", full_page=True)

    # 4. Submit a tiny experiment through the form, shared with a team picked by name: unsafe
    # requests carry the CSRF token.
    team = page.evaluate(
        "async () => (await import('/static/js/api.js')).postJson('/api/v1/teams', {name: 'Lab'})"
    )
    page.get_by_role("link", name="Submit", exact=True).click()
    page.wait_for_selector('#spec-form[data-ready="true"]')
    picker = page.get_by_label("Share with team")
    options = picker.locator("option").evaluate_all("os => os.map(o => [o.value, o.text])")
    assert options == [["", "none (only you)"], [str(team["id"]), "Lab (owner)"]]
    picker.select_option(label="Lab (owner)")
    page.get_by_label("Experiment name").fill("login tiny")
    page.get_by_label("Model", exact=True).select_option("mlp")
    page.get_by_label("Dataset", exact=True).select_option("digits")
    page.get_by_label("Epochs", exact=True).fill("1")
    page.get_by_label("Batch size", exact=True).fill("32")
    page.get_by_label("Train samples", exact=True).fill("256")
    page.get_by_label("Test samples", exact=True).fill("128")
    page.wait_for_function(
        "() => /^\\d+ runs?/.test(document.getElementById('preview').textContent)"
    )
    page.get_by_role("button", name="Submit experiment").click()
    page.wait_for_url(re.compile(r"/\?experiment_id=\d+"))
    experiment_id = page.url.rsplit("=", 1)[1]
    page.locator(f'tr[data-experiment-id="{experiment_id}"]').wait_for()
    stored = page.evaluate(
        "async (id) => (await import('/static/js/api.js')).getJson(`/api/v1/experiments/${id}`)",
        experiment_id,
    )
    assert stored["spec"]["team_id"] == team["id"]
    assert page.locator("#form-errors").count() == 0

    # The compare page's dashboard is shared with a team picked by name as well.
    run_ids = page.evaluate(
        "async (id) => (await (await import('/static/js/api.js'))"
        ".getJson(`/api/v1/runs?experiment_id=${id}`)).items.map((r) => r.id)",
        experiment_id,
    )
    page.goto(f"{server.url}/compare?ids={','.join(map(str, run_ids))}")
    dashboard_team = page.get_by_label("Share with team")
    dashboard_team.wait_for()
    options = dashboard_team.locator("option").evaluate_all("os => os.map(o => [o.value, o.text])")
    assert options == [["", "none (only you)"], [str(team["id"]), "Lab (owner)"]]
    page.get_by_label("Dashboard name").fill("lab dashboard")
    dashboard_team.select_option(label="Lab (owner)")
    page.get_by_role("button", name="Save dashboard").click()
    page.wait_for_url(re.compile(r"/dashboards/[^/?]+\?saved=1$"))
    dashboard_id = page.url.split("/dashboards/", 1)[1].split("?", 1)[0]
    saved = page.evaluate(
        "async (id) => (await import('/static/js/api.js')).getJson(`/api/v1/dashboards/${id}`)",
        dashboard_id,
    )
    assert saved["team_id"] == team["id"]
    # the saved dashboard's page fills its picker once it has read your teams
    expect(page.get_by_label("Share with team")).to_have_value(str(team["id"]))
    assert unexpected(console) == []

    # 5. Log out: the session ends, and the next page needs a login again.
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login$"))
    page.goto(f"{server.url}/dashboards")
    page.wait_for_url(re.compile(r"/login\?next=%2Fdashboards$"))

    # 6. Too many failures: the 429 says when to try again.
    for _ in range(MAX_FAILURES):
        log_in(page, "nobody@example.org", "not the password")
        page.wait_for_function(
            "() => /wrong email or password/i.test(document.getElementById('login-message')"
            ".textContent) && !document.getElementById('login-submit').disabled"
        )
    log_in(page, "nobody@example.org", "not the password")
    page.wait_for_function(
        "() => /too many failed logins/i.test(document.getElementById('login-message').textContent)"
    )
    # The first refusal after the free failures waits the first delay (30 s, then doubling),
    # counted from the last failure: a second may pass before the page shows it.
    assert re.search(r"Try again in (29|30) seconds \(at \d", alert.inner_text()), (
        alert.inner_text()
    )

    # 7. `next` never leaves the site.
    for hostile in ["//example.org/x", "/\\example.org", "https://example.org/"]:
        assert (
            page.evaluate("async (n) => (await import('/static/js/api.js')).safeNext(n)", hostile)
            == "/"
        )
    assert unexpected(console) == [], console.errors
    context.close()


def test_single_user_header_and_login_skip(server: Server, browser: Browser) -> None:
    """Single-user (embedded default): the header says so, and /login goes straight on."""
    console = ConsoleLog()
    context = browser.new_context()
    page = context.new_page()
    console.watch(page)
    page.goto(f"{server.url}/login?next=%2Fdashboards")
    page.wait_for_url(re.compile(r"/dashboards$"))
    session = page.locator("header.top .session")
    session.get_by_text("single-user mode (no login)").wait_for()
    assert session.get_by_role("button", name="Log out").count() == 0
    assert console.errors == []
    context.close()

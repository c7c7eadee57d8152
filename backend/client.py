"""A small Python client for Orrery's REST API (used by the CLI, usable from notebooks).

client = OrreryClient("http://127.0.0.1:8000", token=None)
experiment = client.submit(yaml.safe_load(open("examples/papers/mercury.yaml")))
client.wait(experiment["id"])
rows = list(client.iter_runs(experiment_id=[experiment["id"]]))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

TERMINAL = ("done", "failed", "cancelled")


class ApiError(RuntimeError):
    """The server refused a request; `errors` lists (field, reason) pairs where it named them."""

    def __init__(self, status_code: int, message: str, errors: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.errors = errors


def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    errors: list[tuple[str, str]] = []
    if isinstance(detail, list):
        for item in detail:
            loc = [str(part) for part in item.get("loc", []) if part != "body"]
            errors.append((".".join(loc) or "(request)", item.get("msg", "")))
        message = "; ".join(f"{field}: {reason}" for field, reason in errors)
    else:
        message = str(detail)
    raise ApiError(response.status_code, f"HTTP {response.status_code}: {message}", errors)


class OrreryClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1", headers=headers, timeout=timeout
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OrreryClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        _raise_for_status(response)
        return response.json()

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def preview(self, spec: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/experiments/preview", json=spec)

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/experiments", json=spec)

    def experiments(self, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """A page of experiments, newest first."""
        return self._request("GET", "/experiments", params={"limit": limit, "offset": offset})

    def experiment(self, experiment_id: int) -> dict[str, Any]:
        return self._request("GET", f"/experiments/{experiment_id}")

    def cancel(self, experiment_id: int) -> dict[str, Any]:
        return self._request("POST", f"/experiments/{experiment_id}/cancel")

    def cancel_run(self, run_id: int) -> dict[str, Any]:
        return self._request("POST", f"/runs/{run_id}/cancel")

    def retry_run(self, run_id: int) -> dict[str, Any]:
        return self._request("POST", f"/runs/{run_id}/retry")

    def runs(self, **filters: Any) -> dict[str, Any]:
        return self._request("GET", "/runs", params=filters)

    def run(self, run_id: int) -> dict[str, Any]:
        return self._request("GET", f"/runs/{run_id}")

    def groups(self, **filters: Any) -> list[dict[str, Any]]:
        """Design points (runs equal but for the seed) with each figure's mean and interval."""
        return self._request("GET", "/runs/groups", params=filters)

    def compare(self, run_ids: list[int]) -> list[dict[str, Any]]:
        return self._request("GET", "/runs/compare", params={"ids": run_ids})

    def iter_runs(self, page_size: int = 500, **filters: Any) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            page = self.runs(limit=page_size, offset=offset, **filters)
            yield from page["items"]
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return

    def export(self, format: str = "csv", **filters: Any) -> Iterator[bytes]:
        with self._http.stream("GET", "/runs/export", params={"format": format, **filters}) as r:
            if not r.is_success:
                r.read()
                _raise_for_status(r)
            yield from r.iter_bytes()

    def submit_search(self, experiment_id: int, search: dict[str, Any]) -> dict[str, Any]:
        """Run a design search on an experiment (at once if its trainings are done)."""
        return self._request("POST", f"/experiments/{experiment_id}/searches", json=search)

    def searches(self, experiment_id: int) -> list[dict[str, Any]]:
        """The experiment's design searches, oldest first."""
        return self._request("GET", f"/experiments/{experiment_id}/searches")

    def search(self, search_id: int) -> dict[str, Any]:
        return self._request("GET", f"/searches/{search_id}")

    def fronts(self, search_id: int) -> dict[str, Any]:
        return self._request("GET", f"/searches/{search_id}/fronts")

    def sample(self, search_id: int) -> dict[str, Any]:
        return self._request("GET", f"/searches/{search_id}/sample")

    def cancel_search(self, search_id: int) -> dict[str, Any]:
        return self._request("POST", f"/searches/{search_id}/cancel")

    def wait_search(
        self,
        search_id: int,
        poll: float = 1.0,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the search has ended; call on_update with its status after each poll."""
        while True:
            search = self.search(search_id)
            if on_update is not None:
                on_update(search)
            if search["status"] in TERMINAL:
                return search
            time.sleep(poll)

    def wait(
        self,
        experiment_id: int,
        poll: float = 1.0,
        timeout: float | None = None,
        on_update: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until every run has finished; call on_update with the runs after each poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            runs = list(self.iter_runs(experiment_id=[experiment_id], sort="id"))
            if on_update is not None:
                on_update(runs)
            if runs and all(run["status"] in TERMINAL for run in runs):
                return self.experiment(experiment_id)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"experiment {experiment_id} still running after {timeout}s")
            time.sleep(poll)

"""Design searches through the real pipeline: the API, PostgreSQL, Redis and Celery workers.

The chunked evaluation merged by the workers must equal the core's evaluation of every design
in one chunk; a chunk delivered twice (its worker died, its lease was taken back, then it woke
up) is merged once; cancelling stops a search; a front design becomes runs simulated by the
worker whose figures are the search's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.db.models import DesignSearchRow, Experiment, Run, SearchChunk, Training
from backend.db.session import session_scope
from backend.delivery.leases import LeaseTerms
from backend.delivery.queue import make_celery
from backend.delivery.reconcile import reconcile_once
from backend.searches.chunks import claim_chunk, mark_chunk_done
from backend.settings import Settings
from backend.sim.design_search import design_at, design_table, evaluate_chunk, merge
from backend.sim.workload import Workload
from backend.specs.design_search import MAX_CHUNKS, MAX_DESIGNS, DesignSearch
from backend.specs.techniques import extension_sizes
from tests.conftest import start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING, worker_env
from tests.reliability.chaos import poll
from worker.jobs import run_training_job
from worker.search_jobs import run_chunk_job

SEARCH: dict[str, Any] = {
    "base": "edge",
    "mode": "both",
    "parameters": {
        "rows": {"values": [8, 16, 32]},
        "cols": {"values": [8, 16]},
        "clock_mhz": {"values": [200, 500]},
        "dram_bandwidth": {"low": 1, "high": 16, "log": True},
    },
    "samples": 88,  # 12 grid points + 88 random designs = 100
    "seed": 7,
    "sample_size": 30,
    "chunk_size": 25,
}
SPEC: dict[str, Any] = {
    "name": "search",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge"],
    "search": SEARCH,
}


def core_result(url: str, search_id: int) -> dict[str, Any]:
    """The core's answer for the whole search at once: one chunk of every design, merged."""
    with session_scope(url) as db:
        search = db.get(DesignSearchRow, search_id)
        trainings = {label: db.get(Training, i) for label, i in search.trainings.items()}
        spec = DesignSearch.model_validate(search.spec)
        whole = evaluate_chunk(
            {label: Workload.from_dict(t.workload) for label, t in trainings.items()},
            spec,
            0,
            spec.design_count,
            mcache={
                label: extension_sizes(t.technique_params)["mcache"]
                for label, t in trainings.items()
            },
        )
    return merge([whole]).to_json()


def search_row(url: str, search_id: int) -> DesignSearchRow:
    with session_scope(url) as db:
        return db.get(DesignSearchRow, search_id)


def chunk_ids(url: str, search_id: int) -> list[int]:
    with session_scope(url) as db:
        return list(
            db.scalars(
                select(SearchChunk.id)
                .where(SearchChunk.search_id == search_id)
                .order_by(SearchChunk.position)
            )
        )


@pytest.fixture
def trained_search(api: TestClient, pg_settings: Settings) -> int:
    """An experiment with a search, trained here (no worker), the search started as the
    reconciler starts it: its chunks are sent, none evaluated."""
    url = pg_settings.effective_database_url
    experiment = api.post("/api/v1/experiments", json=SPEC)
    assert experiment.status_code == 201, experiment.text
    (search,) = api.get(f"/api/v1/experiments/{experiment.json()['id']}/searches").json()
    assert search["status"] == "waiting" and search["designs"] is None
    with session_scope(url) as db:
        trainings = list(db.scalars(select(Training.id)))
    for training_id in trainings:
        assert run_training_job(url, training_id, task_id="t") == "done"
    report = reconcile_once(pg_settings, make_celery(pg_settings))
    assert report.searches_started == [search["id"]]
    return search["id"]


def test_chunks_merged_equal_one_evaluation_of_every_design(
    api: TestClient, pg_settings: Settings, trained_search: int
) -> None:
    url = pg_settings.effective_database_url
    started = api.get(f"/api/v1/searches/{trained_search}").json()
    assert started["status"] == "running" and started["designs"] == 100
    assert started["progress"] == {
        "chunks_total": 4,
        "chunks_done": 0,
        "designs_evaluated": 0,
        "fraction": 0.0,
    }
    # Evaluated in an order of their own, as several workers would.
    for chunk_id in reversed(chunk_ids(url, trained_search)):
        assert run_chunk_job(url, chunk_id, task_id="c").status == "done"
    search = search_row(url, trained_search)
    assert search.status == "done"
    assert search.result == core_result(url, trained_search)
    assert set(search.result["workloads"]) == {"baseline", "sparsetrain"}
    spec = DesignSearch.model_validate(search.spec)
    table = design_table(spec, 0, 100)
    kept = search.design_fields["index"]
    assert kept == sorted(
        {
            i
            for w in search.result["workloads"].values()
            for p in ("front", "sample")
            for i in w[p]["index"]
        }
    )
    for path, values in search.design_fields["fields"].items():
        assert values == [
            table[path][i].item() if hasattr(table[path][i], "item") else table[path][i]
            for i in kept
        ]
    for index, config in search.front_designs.items():
        assert config == design_at(spec, int(index)).model_dump(mode="json")

    done = api.get(f"/api/v1/searches/{trained_search}").json()
    assert done["progress"]["chunks_done"] == 4 and done["progress"]["designs_evaluated"] == 100
    assert done["techniques"]["sparsetrain"]["evaluated"] == 100
    fronts = api.get(f"/api/v1/searches/{trained_search}/fronts").json()
    for label, workload in search.result["workloads"].items():
        points = fronts["fronts"][label]
        assert [p["index"] for p in points] == workload["front"]["index"]
        assert [[p["time_s"], p["energy_j"], p["area_mm2"]] for p in points] == workload["front"][
            "figures"
        ]
        for point in points:
            design = design_at(spec, point["index"])
            assert point["fields"] == {path: _field(design, path) for path in SEARCH["parameters"]}
    sample = api.get(f"/api/v1/searches/{trained_search}/sample").json()
    designs = sample["designs"]
    for label, series in sample["techniques"].items():
        workload = search.result["workloads"][label]
        expected = dict(
            zip(workload["sample"]["index"], workload["sample"]["figures"], strict=True)
        )
        expected.update(zip(workload["front"]["index"], workload["front"]["figures"], strict=True))
        got = {
            designs["index"][row]: [t, e, a]
            for row, t, e, a in zip(
                series["row"], series["time_s"], series["energy_j"], series["area_mm2"], strict=True
            )
        }
        assert got.keys() == expected.keys()
        for index, figures in expected.items():  # sent to seven significant digits
            assert got[index] == pytest.approx(figures, rel=5.000001e-7, abs=0)
    for row, index in enumerate(designs["index"]):
        design = design_at(spec, index)
        assert (
            designs["sram_kib"][row]
            == design.ifmap_sram_kib + design.filter_sram_kib + design.ofmap_sram_kib
        )
    assert sample["ranges"]["rows"][0] >= 4 and sample["ranges"]["rows"][1] <= 32
    all_times = [t for s in sample["techniques"].values() for t in s["time_s"]]
    assert sample["ranges"]["time_s"] == [min(all_times), max(all_times)]


def _field(design: Any, path: str) -> Any:
    value = design
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_a_chunk_delivered_twice_is_merged_once(
    api: TestClient, pg_settings: Settings, trained_search: int
) -> None:
    url = pg_settings.effective_database_url
    terms = LeaseTerms(lease_seconds=60, max_attempts=3)
    first, *others = chunk_ids(url, trained_search)
    experiment_id = api.get(f"/api/v1/searches/{trained_search}").json()["experiment_id"]
    refused = api.delete(f"/api/v1/experiments/{experiment_id}")
    assert refused.status_code == 409 and "design search(es) under way" in refused.text
    # A delivery claims the first chunk, then its worker dies.
    with session_scope(url) as db:
        dead = claim_chunk(db, first, "dead", terms)
    assert dead == 1
    # While its lease lives, a redelivery leaves the chunk alone.
    assert run_chunk_job(url, first, "early", terms).status == "running"
    # The lease expires; the reconciler takes the chunk back and a new delivery merges it.
    with session_scope(url) as db:
        db.execute(update(SearchChunk).where(SearchChunk.id == first).values(heartbeat_at=None))
    report = reconcile_once(pg_settings, make_celery(pg_settings))
    assert report.chunks_expired == [first]
    assert run_chunk_job(url, first, "second", terms).status == "done"
    merged_once = search_row(url, trained_search).result
    # The dead delivery wakes up and tries to store: fenced off, nothing changes.
    with session_scope(url) as db:
        assert mark_chunk_done(db, first, trained_search, dead, 1.0) is None
    # Delivered yet again after it was merged: a no-op.
    assert run_chunk_job(url, first, "third", terms).status == "done"
    assert search_row(url, trained_search).result == merged_once
    for chunk_id in others:
        assert run_chunk_job(url, chunk_id, "c", terms).status == "done"
    search = search_row(url, trained_search)
    assert search.status == "done"
    for workload in search.result["workloads"].values():
        assert workload["evaluated"] == 100
    assert search.result == core_result(url, trained_search)
    with session_scope(url) as db:
        assert db.scalar(select(SearchChunk.attempts).where(SearchChunk.id == first)) == 2


def test_cancel_stops_a_search(api: TestClient, pg_settings: Settings, trained_search: int) -> None:
    url = pg_settings.effective_database_url
    first, second, *rest = chunk_ids(url, trained_search)
    assert run_chunk_job(url, first, "c").status == "done"
    # A delivery is evaluating the second chunk when the search is cancelled.
    with session_scope(url) as db:
        attempt = claim_chunk(db, second, "busy")
    cancelled = api.post(f"/api/v1/searches/{trained_search}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["progress"]["chunks_done"] == 1
    with session_scope(url) as db:
        assert mark_chunk_done(db, second, trained_search, attempt, 1.0) is None
    for chunk_id in rest:
        assert run_chunk_job(url, chunk_id, "late").status == "cancelled"
    search = api.get(f"/api/v1/searches/{trained_search}").json()
    assert search["status"] == "cancelled"
    assert search["progress"]["designs_evaluated"] == 25
    assert search["techniques"]["baseline"]["evaluated"] == 25
    assert api.post(f"/api/v1/searches/{trained_search}/cancel").json()["status"] == "cancelled"
    # Over, it goes with its experiment.
    assert api.delete(f"/api/v1/experiments/{search['experiment_id']}").status_code == 204
    assert api.get(f"/api/v1/searches/{trained_search}").status_code == 404


def test_a_million_design_search_starts_with_bounded_chunks_and_cancels(
    api: TestClient, pg_settings: Settings, trained_search: int
) -> None:
    """The largest search: its chunks are at most MAX_CHUNKS rows, a window of them is sent,
    and cancelling ends every one."""
    url = pg_settings.effective_database_url
    experiment_id = search_row(url, trained_search).experiment_id
    big = {**SEARCH, "samples": MAX_DESIGNS - 12, "sample_size": 100}
    refused = api.post(f"/api/v1/experiments/{experiment_id}/searches", json=big)
    assert refused.status_code == 422, refused.text
    assert "chunk_size at least 1,000" in refused.json()["detail"][0]["msg"]
    made = api.post(
        f"/api/v1/experiments/{experiment_id}/searches", json={**big, "chunk_size": 1000}
    )
    assert made.status_code == 201, made.text
    search = made.json()
    assert search["status"] == "running" and search["designs"] == MAX_DESIGNS
    assert search["progress"]["chunks_total"] == MAX_CHUNKS
    with session_scope(url) as db:
        chunks = db.execute(
            select(SearchChunk.start, SearchChunk.stop, SearchChunk.sent_at)
            .where(SearchChunk.search_id == search["id"])
            .order_by(SearchChunk.position)
        ).all()
    assert [(start, stop) for start, stop, _ in chunks] == [
        (start, start + 1000) for start in range(0, MAX_DESIGNS, 1000)
    ]
    assert 0 < sum(sent is not None for *_, sent in chunks) <= pg_settings.dispatch_ahead
    cancelled = api.post(f"/api/v1/searches/{search['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    with session_scope(url) as db:
        statuses = db.scalars(
            select(SearchChunk.status).where(SearchChunk.search_id == search["id"]).distinct()
        )
        assert list(statuses) == ["cancelled"]


def test_a_waiting_search_recorded_under_looser_bounds_fails_at_its_start(
    pg_settings: Settings, trained_search: int
) -> None:
    """A search recorded before chunks were bounded (chunk_size 1 for 10^6 designs) is not
    started with a million chunks: it fails, saying why, and the reconciler goes on."""
    url = pg_settings.effective_database_url
    experiment_id = search_row(url, trained_search).experiment_id
    loose = {**DesignSearch.model_validate(SEARCH).model_dump(mode="json")}
    loose.update(samples=MAX_DESIGNS - 12, chunk_size=1)
    with session_scope(url) as db:
        row = DesignSearchRow(experiment_id=experiment_id, spec=loose, status="waiting")
        db.add(row)
        db.flush()
        old_id = row.id
    report = reconcile_once(pg_settings, make_celery(pg_settings))
    assert report.searches_started == []
    old = search_row(url, old_id)
    assert old.status == "failed" and "chunk_size at least 1,000" in old.error
    assert chunk_ids(url, old_id) == []


def test_a_running_search_recorded_under_looser_bounds_runs_to_its_end(
    api: TestClient, pg_settings: Settings, trained_search: int
) -> None:
    """A search started before chunks were bounded (its spec now over the bound, as is its
    experiment's `search` section) is still read, evaluated and merged to its end."""
    url = pg_settings.effective_database_url
    loose = {**search_row(url, trained_search).spec, "samples": 4_988, "chunk_size": 1}
    with session_scope(url) as db:
        search = db.get(DesignSearchRow, trained_search)
        search.spec = loose
        experiment = db.get(Experiment, search.experiment_id)
        experiment.spec = {**experiment.spec, "search": loose}
        experiment_id = experiment.id
    assert api.get(f"/api/v1/searches/{trained_search}").status_code == 200
    for chunk_id in chunk_ids(url, trained_search):
        assert run_chunk_job(url, chunk_id, "t").status == "done"
    (listed,) = api.get(f"/api/v1/experiments/{experiment_id}/searches").json()
    assert listed["status"] == "done" and listed["spec"]["chunk_size"] == 1
    assert api.get(f"/api/v1/searches/{trained_search}/fronts").status_code == 200


def test_search_with_a_real_worker_and_a_front_design_as_runs(
    api: TestClient, pg_settings: Settings, redis_db_url: str, tmp_path: Path
) -> None:
    url = pg_settings.effective_database_url
    worker = start_worker(worker_env(pg_settings, redis_db_url, tmp_path), cwd=tmp_path)
    try:
        experiment = api.post("/api/v1/experiments", json=SPEC).json()
        (search,) = api.get(f"/api/v1/experiments/{experiment['id']}/searches").json()

        def ended() -> dict[str, Any] | None:
            answer = api.get(f"/api/v1/searches/{search['id']}").json()
            return answer if answer["status"] in ("done", "failed", "cancelled") else None

        final = poll(ended, 300, "the search to end")
        assert final["status"] == "done", final
        fronts = api.get(f"/api/v1/searches/{search['id']}/fronts").json()
        point = fronts["fronts"]["sparsetrain"][0]
        made = api.post(f"/api/v1/searches/{search['id']}/designs/{point['index']}/runs")
        assert made.status_code == 201, made.text
        new_ids = {run["id"] for run in made.json()}

        def simulated() -> list[Run] | None:
            with session_scope(url) as db:
                runs = list(db.scalars(select(Run).where(Run.id.in_(new_ids))))
            return runs if all(r.status == "done" for r in runs) else None

        runs = poll(simulated, 120, "the design's runs to be simulated")
        again = api.post(f"/api/v1/searches/{search['id']}/designs/{point['index']}/runs")
    finally:
        log = stop_process(worker)
    assert search_row(url, search["id"]).result == core_result(url, search["id"]), log[-3000:]
    assert again.status_code == 409 and "already has runs" in again.json()["detail"]
    spec = DesignSearch.model_validate(final["spec"])
    by_technique = {run.technique: run for run in runs}
    assert set(by_technique) == {"baseline", "sparsetrain"}
    technique_run = by_technique["sparsetrain"]
    assert technique_run.baseline_run_id == by_technique["baseline"].id
    assert technique_run.accelerator_config == (
        design_at(spec, point["index"])
        .model_copy(update={"name": technique_run.accelerator_name})
        .with_extensions({"zero_skipping"})
        .model_dump()
    )
    # The run simulated by the worker measures what the search measured for the design.
    assert technique_run.seconds == point["time_s"]
    assert technique_run.energy_pj * 1e-12 == pytest.approx(point["energy_j"], rel=1e-12)
    assert technique_run.area_mm2 == pytest.approx(point["area_mm2"], rel=1e-12)
    assert technique_run.params["accelerator.rows"] == point["fields"]["rows"]
    assert technique_run.speedup is not None

    saved = api.post(
        f"/api/v1/searches/{search['id']}/designs/{point['index']}/accelerator",
        json={"name": "my design"},
    )
    assert saved.status_code == 201, saved.text
    listed = api.get("/api/v1/accelerators").json()
    assert [(a["name"], a["design_index"]) for a in listed] == [("my design", point["index"])]
    assert listed[0]["config"] == design_at(spec, point["index"]).model_copy(
        update={"name": "my design"}
    ).model_dump(mode="json")
    twice = api.post(
        f"/api/v1/searches/{search['id']}/designs/{point['index']}/accelerator",
        json={"name": "my design"},
    )
    assert twice.status_code == 422 and twice.json()["detail"][0]["loc"] == ["body", "name"]
    off_front = api.post(f"/api/v1/searches/{search['id']}/designs/100000/runs")
    assert off_front.status_code == 404


@pytest.mark.parametrize(
    ("search", "loc", "reason"),
    [
        # The spec checks its parameters together: the search's loc, the message names it.
        ({"parameters": {"accelerator.rows": {"values": [8]}}}, ["search"], "'accelerator.rows'"),
        ({"parameters": {"rows": {"values": [0]}}}, ["search"], "parameter 'rows'"),
        ({"mode": "grid", "parameters": {"rows": {"start": 1, "stop": 1024, "step": 1},
          "cols": {"start": 1, "stop": 1024, "step": 1}}}, ["search"], "at most 1,000,000"),
        ({"samples": 2_000_000}, ["search", "samples"], "1000000"),
        ({"chunk_size": 0}, ["search", "chunk_size"], "greater than or equal to 1"),
        # 1,000,000 designs in chunks of 999: 1,002 chunks, over the bound.
        ({"samples": 999_988, "chunk_size": 999}, ["search"], "chunk_size at least 1,000"),
        ({"samples": 4_988, "chunk_size": 1}, ["search"], "into 5,000 chunks; at most 1,000"),
        ({"sample_size": 20_001}, ["search", "sample_size"], "20000"),
        ({"objectives": ["time"]}, ["search", "objectives"], "at least 2"),
        ({"constraints": {"area_mm2_max": -1}}, ["search", "constraints", "area_mm2_max"], "0"),
        ({"base": "no-such-preset"}, ["search", "base"], "unknown preset"),
    ],
)  # fmt: skip
def test_a_bad_search_is_refused_naming_the_field(
    api: TestClient, search: dict[str, Any], loc: list[str], reason: str
) -> None:
    refused = api.post("/api/v1/experiments", json={**SPEC, "search": {**SEARCH, **search}})
    assert refused.status_code == 422, refused.text
    error = refused.json()["detail"][0]
    assert [str(part) for part in error["loc"]][1 : 1 + len(loc)] == loc, error
    assert reason in error["msg"], error
    assert api.get("/api/v1/experiments").json()["total"] == 0


def test_a_search_needs_one_training_per_technique_set(api: TestClient) -> None:
    swept = {**SPEC, "sweep": {"parameters": {"training.learning_rate": {"values": [0.1, 0.2]}}}}
    refused = api.post("/api/v1/experiments", json=swept)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "search"]
    assert "training.learning_rate" in refused.json()["detail"][0]["msg"]
    plain = api.post("/api/v1/experiments", json={**swept, "search": None}).json()
    later = api.post(f"/api/v1/experiments/{plain['id']}/searches", json=SEARCH)
    assert later.status_code == 422 and "training.learning_rate" in later.text
    bad_body = api.post(f"/api/v1/experiments/{plain['id']}/searches", json={**SEARCH, "seed": -1})
    assert bad_body.status_code == 422
    assert bad_body.json()["detail"][0]["loc"] == ["body", "seed"]

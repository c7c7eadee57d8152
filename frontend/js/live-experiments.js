// Recent experiments with live status, counts and progress (per cent, time left) from
// server-sent events, and cancel buttons.

import { API, describe, getJson, postJson } from "./api.js";
import { confirmButton } from "./confirm.js";
import { el } from "./format.js";
import { progressBar } from "./progress.js";

const TERMINAL = new Set(["done", "failed", "cancelled"]);
const MAX_STREAMS = 4; // browsers allow ~6 connections per host; leave room for fetches

/** "2/4 done, 1 failed" from {done, failed, cancelled} counts. */
function countsText(counts, total) {
  return `${counts.done || 0}/${total} done${counts.failed ? `, ${counts.failed} failed` : ""}${counts.cancelled ? `, ${counts.cancelled} cancelled` : ""}`;
}

export class LiveExperiments {
  constructor(container, { onRun, onEnd, onShowRuns }) {
    this.container = container;
    this.onRun = onRun;
    this.onEnd = onEnd;
    this.onShowRuns = onShowRuns;
    this.streams = new Map();
    this.runStates = new Map(); // experiment id -> Map(run id -> {status, progress})
  }

  async load() {
    try {
      const page = await getJson(`${API}/experiments?limit=15`);
      this.render(page.items);
      for (const experiment of page.items) {
        if (!TERMINAL.has(experiment.status)) this.follow(experiment.id);
      }
    } catch (error) {
      this.container.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
    }
  }

  render(experiments) {
    if (!experiments.length) {
      this.container.replaceChildren(el("p", { class: "muted" }, "No experiments yet. ", el("a", { href: "/submit", text: "Submit one" }), "."));
      return;
    }
    const rows = experiments.map((experiment) => this.row(experiment));
    this.container.replaceChildren(el("table", { class: "data", "aria-label": "experiments" },
      el("thead", {}, el("tr", {}, ["Experiment", "Status", "Progress", "Runs", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)));
  }

  row(experiment) {
    const counts = experiment.run_counts;
    const finished = counts.done + counts.failed + counts.cancelled;
    const total = experiment.total_runs || 1;
    const cancel = confirmButton({
      label: "Cancel", ariaLabel: `cancel experiment ${experiment.id}`, hidden: TERMINAL.has(experiment.status),
      question: `Stop its ${experiment.total_runs - finished} unfinished run(s)?`, confirmLabel: "Yes, cancel",
      action: () => this.cancel(experiment.id),
    });
    return el("tr", { dataset: { experimentId: String(experiment.id), status: experiment.status } },
      el("td", {}, el("a", { href: `/experiments/${experiment.id}` }, `#${experiment.id} `, el("b", { text: experiment.name }))),
      el("td", { class: "experiment-status" }, el("span", { class: `badge ${experiment.status}`, text: experiment.status })),
      el("td", { class: "experiment-progress" }, progressBar({ fraction: finished / total }, `experiment ${experiment.id} progress`)),
      el("td", { class: "experiment-counts", text: countsText(counts, experiment.total_runs) }),
      el("td", {}, el("button", { type: "button", text: "Show runs", onclick: () => this.onShowRuns(experiment.id) }), " ", cancel));
  }

  rowOf(id) {
    return this.container.querySelector(`tr[data-experiment-id="${id}"]`);
  }

  follow(id) {
    if (this.streams.has(id) || this.streams.size >= MAX_STREAMS) return;
    const source = new EventSource(`${API}/experiments/${id}/events`);
    this.streams.set(id, source);
    this.runStates.set(id, new Map());
    source.addEventListener("run", (event) => {
      const run = JSON.parse(event.data);
      this.runStates.get(id).set(run.id, run);
      this.showProgress(id);
      this.onRun(run);
    });
    source.addEventListener("experiment", (event) => this.showStatus(id, JSON.parse(event.data).status));
    source.addEventListener("progress", (event) => {
      const row = this.rowOf(id);
      if (row) row.querySelector(".experiment-progress").replaceChildren(progressBar(JSON.parse(event.data), `experiment ${id} progress`));
    });
    source.addEventListener("end", (event) => {
      source.close();
      this.streams.delete(id);
      this.showStatus(id, JSON.parse(event.data).status);
      this.refresh(id);
      this.onEnd(id);
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) this.streams.delete(id);
    };
  }

  /** The counts from the runs' states (the stream sends every run first, then changes); the
   * bar and its words come with the stream's `progress` events. */
  showProgress(id) {
    const row = this.rowOf(id);
    const runs = [...this.runStates.get(id).values()];
    if (!row || !runs.length) return;
    const counts = {};
    for (const run of runs) counts[run.status] = (counts[run.status] || 0) + 1;
    row.querySelector(".experiment-counts").textContent = countsText(counts, runs.length);
  }

  showStatus(id, status) {
    const row = this.rowOf(id);
    if (!row) return;
    row.dataset.status = status;
    row.querySelector(".experiment-status").replaceChildren(el("span", { class: `badge ${status}`, text: status }));
    if (TERMINAL.has(status)) row.querySelector(".confirm").hidden = true;
  }

  async refresh(id) {
    const experiment = await getJson(`${API}/experiments/${id}`);
    const row = this.rowOf(id);
    if (row) row.replaceWith(this.row(experiment));
  }

  async cancel(id) {
    try {
      await postJson(`${API}/experiments/${id}/cancel`);
      await this.refresh(id);
    } catch (error) {
      window.alert(`Could not cancel: ${describe(error)}`);
    }
  }
}

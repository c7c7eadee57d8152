// One experiment: its status, counts and progress (live while it runs), its design searches and
// its runs (each linked to its page), and its spec.

import { annotationsEditor } from "../annotations.js";
import { API, del, describe, getJson, query } from "../api.js";
import { confirmButton } from "../confirm.js";
import { el, formatValue, formatWhen } from "../format.js";
import { showPageError } from "../page-errors.js";
import { progressBar } from "../progress.js";
import { RunTable } from "../run-table.js";
import { specText } from "../spec-text.js";

const experimentId = Number(location.pathname.split("/").pop());
const compareButton = document.getElementById("compare-selected");
const TERMINAL = new Set(["done", "failed", "cancelled"]);
const progressLabel = `experiment ${experimentId} progress`;

function renderSummary(experiment) {
  document.title = `Experiment #${experiment.id} · Orrery`;
  document.getElementById("title").textContent = `Experiment #${experiment.id}: ${experiment.name}`;
  const counts = experiment.run_counts;
  const rows = [
    ["Status", el("span", { class: `badge ${experiment.status}`, text: experiment.status })],
    ["Runs", `${experiment.total_runs} (${counts.done} done, ${counts.running} running, ${counts.queued} queued, ${counts.failed} failed, ${counts.cancelled} cancelled)`],
    ["Trainings", `${experiment.trainings} (runs that differ only in the accelerator share one)`],
    ["Baselines", experiment.spec.baseline_hardware === "same"
      ? "dense training on each run's own accelerator with only zero-skipping on"
      : "dense training on the accelerator with every extension off"],
    ["Created", formatWhen(experiment.created_at)],
    ["Finished", formatWhen(experiment.finished_at)],
  ];
  if (experiment.spec.description) rows.splice(1, 0, ["Description", experiment.spec.description]);
  if (!TERMINAL.has(experiment.status) && experiment.progress) {
    rows.splice(1, 0, ["Progress", el("span", { id: "experiment-progress" }, progressBar(experiment.progress, progressLabel))]);
  }
  const list = document.getElementById("summary");
  list.replaceChildren();
  for (const [term, value] of rows) list.append(el("dt", { text: term }), el("dd", {}, value));
  document.getElementById("spec").textContent = specText(experiment.spec, "yaml");
}

/** The experiment's design searches, each linked to its page; the section only when there are. */
async function renderSearches() {
  const searches = await getJson(`${API}/experiments/${experimentId}/searches`);
  document.getElementById("searches").hidden = !searches.length;
  const headers = ["Search", "Status", "Designs", "Evaluated", "Objectives", "Searched fields"];
  document.getElementById("search-list").replaceChildren(!searches.length ? "" : el("table", { class: "data", id: "search-table" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, searches.map((search) => el("tr", { dataset: { searchId: String(search.id) } },
      el("td", {}, el("a", { href: `/searches/${search.id}`, text: `design search #${search.id}` })),
      el("td", {}, el("span", { class: `badge ${search.status}`, text: search.status })),
      el("td", { class: "num", text: search.designs === null ? "–" : formatValue(search.designs) }),
      el("td", { class: "num", text: formatValue(search.progress.fraction, "%") }),
      el("td", { text: search.objectives.join(", ") }),
      el("td", { text: search.fields.join(", ") }))))));
}

async function main() {
  let status;
  try {
    const experiment = await getJson(`${API}/experiments/${experimentId}`);
    status = experiment.status;
    renderSummary(experiment);
    document.getElementById("experiment-actions").append(confirmButton({
      label: "Delete experiment", confirmLabel: "Yes, delete",
      question: `Delete experiment #${experiment.id}, its ${experiment.total_runs} run(s) and their results for good?`,
      action: async () => {
        try {
          await del(`${API}/experiments/${experiment.id}`);
          location.href = "/";
        } catch (error) {
          document.getElementById("page-errors").textContent = `Not deleted: ${describe(error)}`;
        }
      },
    }));
    annotationsEditor(document.getElementById("annotations"), {
      path: `${API}/experiments/${experimentId}`, tags: experiment.tags, notes: experiment.notes, what: "experiment",
    });
  } catch (error) {
    showPageError(`Cannot show experiment ${experimentId}: ${describe(error)}`, error);
    return;
  }
  await renderSearches().catch((error) => {
    document.getElementById("page-errors").textContent = `The design searches did not load: ${describe(error)}`;
  });
  document.getElementById("clone").href = `/submit?clone=${experimentId}`;
  const filters = { experiment_id: String(experimentId) };
  document.getElementById("export-csv").href = `${API}/runs/export${query({ ...filters, format: "csv" })}`;
  const table = new RunTable(document.getElementById("run-table"), {
    state: { filters, sort: "id", limit: 100 },
    onChange: (t) => {
      compareButton.disabled = t.selected.size === 0;
      compareButton.textContent = `Compare selected (${t.selected.size})`;
    },
  });
  compareButton.addEventListener("click", () => {
    location.href = `/compare?ids=${[...table.selected].sort((a, b) => a - b).join(",")}`;
  });
  await table.load();
  if (!TERMINAL.has(status)) follow(table);
}

/** While the experiment runs: its runs' progress and its own from the event stream, and the
 * summary and table read again whenever a run finishes (the events carry no metrics). */
function follow(table) {
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        renderSummary(await getJson(`${API}/experiments/${experimentId}`));
        await Promise.all([table.load(), renderSearches()]);
      } catch (error) {
        document.getElementById("page-errors").textContent = `Not refreshed: ${describe(error)}`;
      }
    }, 300);
  };
  const source = new EventSource(`${API}/experiments/${experimentId}/events`);
  const statuses = new Map();
  source.addEventListener("run", (event) => {
    const run = JSON.parse(event.data);
    const before = statuses.get(run.id);
    statuses.set(run.id, run.status);
    if (before !== undefined && before !== run.status) refresh();
    table.updateRun(run);
  });
  source.addEventListener("progress", (event) => {
    document.getElementById("experiment-progress")?.replaceChildren(progressBar(JSON.parse(event.data), progressLabel));
  });
  source.addEventListener("end", () => {
    source.close();
    refresh();
  });
}

main();

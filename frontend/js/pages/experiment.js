// One experiment: its status and counts, its runs (each linked to its page) and its spec.

import { annotationsEditor } from "../annotations.js";
import { API, del, describe, getJson, query } from "../api.js";
import { confirmButton } from "../confirm.js";
import { el } from "../format.js";
import { showPageError } from "../page-errors.js";
import { RunTable } from "../run-table.js";
import { specText } from "../spec-text.js";

const experimentId = Number(location.pathname.split("/").pop());
const compareButton = document.getElementById("compare-selected");

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
    ["Created", new Date(experiment.created_at).toLocaleString()],
    ["Finished", experiment.finished_at ? new Date(experiment.finished_at).toLocaleString() : "–"],
  ];
  if (experiment.spec.description) rows.splice(1, 0, ["Description", experiment.spec.description]);
  const list = document.getElementById("summary");
  for (const [term, value] of rows) list.append(el("dt", { text: term }), el("dd", {}, value));
  document.getElementById("spec").textContent = specText(experiment.spec, "yaml");
}

async function main() {
  try {
    const experiment = await getJson(`${API}/experiments/${experimentId}`);
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
}

main();

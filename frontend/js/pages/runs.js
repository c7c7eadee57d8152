// The experiments-and-runs page: live experiments above, the run table below, state in the URL.

import { API, query } from "../api.js";
import { el } from "../format.js";
import { LiveExperiments } from "../live-experiments.js";
import { FILTERS, RunTable } from "../run-table.js";
import { columnChooser, groupByControl } from "../run-views.js";
import { savedFilters } from "../saved-filters.js";

const params = new URLSearchParams(location.search);
const initialFilters = Object.fromEntries(FILTERS.map((f) => [f.key, params.get(f.key) || ""]).filter(([, v]) => v));
const form = document.getElementById("run-filters");
const compareButton = document.getElementById("compare-selected");

function buildFilterForm() {
  for (const filter of FILTERS) {
    const id = `filter-${filter.key}`;
    const input = filter.options
      ? el("select", { id, name: filter.key }, filter.options.map((o) => el("option", { value: o, text: o || "any" })))
      : el("input", { id, name: filter.key, type: filter.type || "text", placeholder: filter.placeholder || "" });
    input.value = initialFilters[filter.key] || "";
    form.append(el("div", { class: "field" }, el("label", { for: id, text: filter.label }), input));
  }
  form.append(el("div", { class: "field" }, el("span", { text: "\u00a0" }), el("button", { type: "submit", text: "Apply filters" })));
}

function currentFilters() {
  const data = new FormData(form);
  return Object.fromEntries([...data.entries()].filter(([, v]) => v !== ""));
}

function syncUrl(table) {
  const { filters, sort, offset, limit } = table.state;
  const state = { ...filters, sort: sort === "-id" ? "" : sort, offset: offset || "", limit: limit === 50 ? "" : limit };
  history.replaceState(null, "", `/${query(state)}`);
  document.getElementById("export-csv").href = `${API}/runs/export${query({ ...filters, sort, format: "csv" })}`;
  document.getElementById("export-json").href = `${API}/runs/export${query({ ...filters, sort, format: "json" })}`;
  compareButton.disabled = table.selected.size === 0;
  compareButton.textContent = `Compare selected (${table.selected.size})`;
}

buildFilterForm();
const table = new RunTable(document.getElementById("run-table"), {
  state: {
    filters: initialFilters,
    sort: params.get("sort") || "-id",
    offset: Number(params.get("offset") || 0),
    limit: Number(params.get("limit") || 50),
  },
  onChange: syncUrl,
});

let reloadTimer = null;
const experiments = new LiveExperiments(document.getElementById("experiments"), {
  onRun: (run) => {
    table.updateRun(run);
    if (run.status === "done" || run.status === "failed" || run.status === "cancelled") {
      clearTimeout(reloadTimer);
      reloadTimer = setTimeout(() => table.load(), 300); // finished rows with metrics or reason
    }
  },
  onEnd: () => table.load(),
  onShowRuns: (id) => {
    form.querySelector("[name=experiment_id]").value = String(id);
    table.setFilters(currentFilters());
  },
});

form.addEventListener("submit", (event) => {
  event.preventDefault();
  table.setFilters(currentFilters());
});
compareButton.addEventListener("click", () => {
  location.href = `/compare?ids=${[...table.selected].sort((a, b) => a - b).join(",")}`;
});

let showGroups = null;
// The account's columns first, so the table is drawn once, with them.
columnChooser(document.getElementById("column-control"), table).catch(() => {}).then(() => table.load()).then(() => {
  const swept = [...new Set((table.page?.items || []).flatMap((r) => Object.keys(r.params || {})))]
    .filter((key) => !["technique", "accelerator", "seed"].includes(key)).sort();
  groupByControl(document.getElementById("group-control"), document.getElementById("run-groups"), table, swept).then((show) => { showGroups = show; });
});
const filtered = table.onChange;
table.onChange = (t) => {
  filtered(t);
  if (showGroups) showGroups();
};
experiments.load();
savedFilters(document.getElementById("saved-filters"), {
  current: () => ({ filters: table.state.filters, sort: table.state.sort }),
  apply: (filters, sort) => {
    for (const filter of FILTERS) form.querySelector(`[name=${filter.key}]`).value = [].concat(filters[filter.key] ?? "").join(",");
    table.state.sort = sort;
    table.setFilters(filters);
  },
});

// The run table's view controls: which columns it shows (kept per user on the server) and a
// grouped view (one row per value of a column: run count and mean ± sd of each metric).

import { API, describe, getJson, query, request } from "./api.js";
import { el, fmtNumber } from "./format.js";
import { COLUMN_CHOICES, DEFAULT_COLUMNS } from "./run-table.js";

const GROUPABLE = [
  ["technique", "technique"], ["model", "model"], ["dataset", "dataset"], ["accelerator_name", "accelerator"],
  ["status", "status"], ["seed", "seed"], ["experiment_id", "experiment"], ["baseline_hardware", "baseline hardware"],
];
const METRICS = [
  ["accuracy", "Accuracy (%)", 100], ["speedup", "Speedup (×)", 1], ["energy_ratio", "Energy ratio", 1],
  ["total_cycles", "Cycles", 1], ["energy_pj", "Energy (µJ)", 1e-6], ["dram_bytes", "DRAM (MiB)", 1 / 2 ** 20],
  ["seconds", "Time (s)", 1], ["area_mm2", "Area (mm²)", 1],
];

/** A "Columns" menu of checkboxes; choices are saved to the server and applied to `table`. */
export async function columnChooser(container, table) {
  let chosen = DEFAULT_COLUMNS;
  try {
    const stored = await getJson(`${API}/preferences`);
    if (stored.run_table_columns) chosen = stored.run_table_columns;
  } catch {
    // preferences unavailable: the default columns still work
  }
  table.setColumns(chosen);
  const status = el("span", { class: "muted", role: "status" });
  // Not <label>: the filters above already use these words as their labels.
  const boxes = COLUMN_CHOICES.map(({ key, label }) => el("span", { class: "column-choice" },
    el("input", { type: "checkbox", name: "column", value: key, checked: chosen.includes(key), "aria-label": `show column ${label}` }), ` ${label}`));
  const menu = el("details", { class: "column-chooser" }, el("summary", { text: "Columns" }), el("div", {}, boxes), status);
  // One save in flight at a time, then the newest choice: two PUTs racing could land out of
  // order and store an older choice; "saved" is shown only once the newest one is stored.
  let saving = false;
  let latest = null;
  const save = async () => {
    saving = true;
    while (latest !== null) {
      const keys = latest;
      latest = null;
      status.textContent = "saving…";
      try {
        await request("PUT", `${API}/preferences`, { run_table_columns: keys.length ? keys : null });
        if (latest === null) status.textContent = "saved for your account";
      } catch (error) {
        status.textContent = `not saved: ${describe(error)}`;
      }
    }
    saving = false;
  };
  menu.addEventListener("change", () => {
    latest = [...menu.querySelectorAll("input[name=column]:checked")].map((box) => box.value);
    table.setColumns(latest);
    if (!saving) save();
  });
  container.replaceChildren(menu);
}

function cell(summary, scale) {
  if (!summary || summary.mean === null) return "–";
  const mean = fmtNumber(summary.mean * scale);
  return summary.sd === null ? mean : `${mean} ± ${fmtNumber(summary.sd * scale)}`;
}

/** A "Group by" select; while set, `target` shows the grouped summary of the table's filters. */
export function groupByControl(container, target, table, sweptKeys) {
  const select = el("select", { id: "group-by", name: "group-by" },
    el("option", { value: "", text: "no grouping" }),
    GROUPABLE.map(([value, label]) => el("option", { value, text: label })),
    sweptKeys.map((key) => el("option", { value: `param:${key}`, text: `swept: ${key}` })));
  const show = async () => {
    target.hidden = !select.value;
    if (!select.value) return;
    try {
      const groups = await getJson(`${API}/runs/summary${query({ ...table.state.filters, by: select.value })}`);
      target.replaceChildren(el("table", { class: "data", "aria-label": "grouped runs" },
        el("thead", {}, el("tr", {}, ["Group", "Runs", ...METRICS.map(([, label]) => `${label} mean ± sd`)].map((h) => el("th", { text: h })))),
        el("tbody", {}, groups.map((group) => el("tr", {},
          el("td", { text: String(group.value ?? "–") }),
          el("td", { class: "num", text: String(group.runs) }),
          METRICS.map(([key, , scale]) => el("td", { class: "num", text: cell(group.metrics[key], scale) })))))));
    } catch (error) {
      target.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
    }
  };
  select.addEventListener("change", show);
  container.replaceChildren(el("label", { for: "group-by", text: "Group by " }), select);
  return show;
}

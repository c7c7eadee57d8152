// The run table's view controls: which columns it shows (any column the server lists, kept per
// user on the server) and a grouped view (one row per combination of up to three columns' values:
// run count, and per summarised figure (as the server declares them) the mean ± sd over the runs
// that have it, with their number n).

import { API, describe, getJson, query, request } from "./api.js";
import { el, formatEstimate } from "./format.js";
import { loadFigures, summarisedMeasures } from "./figures.js";
import { DEFAULT_COLUMNS, loadColumns } from "./run-table.js";

const GROUP_NAMES = { run: "Run", figure: "Figures", "epoch figure": "Epoch figures (over the training)", training: "Training", accelerator: "Accelerator", technique: "Techniques" };
const GROUP_LEVELS = 3;

/** A "Columns" menu: every column the server lists, by kind, with a search box; choices are
 * saved to the server and applied to `table`. */
export async function columnChooser(container, table) {
  let chosen = DEFAULT_COLUMNS;
  let catalogue = [];
  const [columns, stored] = await Promise.allSettled([loadColumns(), getJson(`${API}/preferences`)]);
  if (columns.status === "fulfilled") catalogue = columns.value;
  else container.replaceChildren(el("span", { class: "errors-box", role: "alert", text: `columns: ${describe(columns.reason)}` }));
  // preferences unavailable: the default columns still work
  if (stored.status === "fulfilled" && stored.value.run_table_columns) chosen = stored.value.run_table_columns;
  table.setColumns(chosen, catalogue);
  const status = el("span", { class: "muted", role: "status" });
  const find = el("input", { type: "search", placeholder: "find a column", "aria-label": "find a column" });
  const groups = Object.keys(GROUP_NAMES).map((group) => {
    const entries = catalogue.filter((c) => c.group === group);
    // Not <label>: the filters above already use these words as their labels.
    const boxes = entries.map((c) => el("span", { class: "column-choice", title: c.description, dataset: { search: `${c.label} ${c.key}`.toLowerCase() } },
      el("input", { type: "checkbox", name: "column", value: c.key, checked: chosen.includes(c.key), "aria-label": `show column ${c.label}` }), ` ${c.label}`));
    return el("fieldset", { class: "column-group" }, el("legend", { text: GROUP_NAMES[group] }), boxes);
  });
  find.addEventListener("input", () => {
    const words = find.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const choice of container.querySelectorAll(".column-choice")) {
      choice.hidden = !words.every((word) => choice.dataset.search.includes(word));
    }
  });
  const menu = el("details", { class: "column-chooser" }, el("summary", { text: "Columns" }), find, el("div", { class: "column-groups" }, groups), status);
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
  menu.addEventListener("change", (event) => {
    if (event.target.name !== "column") return;
    // The added columns keep the order they were ticked in.
    const ticked = new Set([...menu.querySelectorAll("input[name=column]:checked")].map((box) => box.value));
    latest = [...table.columns.filter((key) => ticked.has(key)), ...[...ticked].filter((key) => !table.columns.includes(key))];
    table.setColumns(latest);
    if (!saving) save();
  });
  container.replaceChildren(menu);
}

function cell(summary, unit) {
  if (!summary || summary.mean === null) return "–";
  return `${formatEstimate(summary.mean, summary.sd, unit)} (n = ${summary.n})`;
}

/** "Group by" selects (then by, then by); while one is set, `target` shows the grouped summary
 * of the table's filters. */
export async function groupByControl(container, target, table, sweptKeys) {
  let catalogue = [];
  try {
    catalogue = await loadColumns();
  } catch {
    // the grouping choices then are the swept values only
  }
  await loadFigures().catch(() => null); // without it, the groups show their run counts only
  const byKey = new Map(catalogue.map((c) => [c.key, c]));
  const groupable = catalogue.filter((c) => c.groupable);
  const options = () => [
    el("option", { value: "", text: "–" }),
    Object.keys(GROUP_NAMES).map((group) => {
      const entries = groupable.filter((c) => c.group === group);
      return entries.length ? el("optgroup", { label: GROUP_NAMES[group] }, entries.map((c) => el("option", { value: c.key, text: c.label }))) : null;
    }),
    sweptKeys.length ? el("optgroup", { label: "Swept values" }, sweptKeys.map((key) => el("option", { value: `param:${key}`, text: `swept: ${key}` }))) : null,
  ];
  const selects = Array.from({ length: GROUP_LEVELS }, (_, i) => el("select", { id: `group-by-${i + 1}`, name: "group-by", "aria-label": i ? `then group by (${i + 1})` : "Group by" }, ...options()));
  const label = (key) => byKey.get(key)?.label ?? key.replace(/^param:/, "swept: ");
  const show = async () => {
    const keys = selects.map((s) => s.value).filter(Boolean);
    target.hidden = !keys.length;
    if (!keys.length) return;
    try {
      const groups = await getJson(`${API}/runs/summary${query({ ...table.state.filters, by: keys })}`);
      const values = (group) => (keys.length > 1 ? group.value : [group.value]);
      target.replaceChildren(el("table", { class: "data", "aria-label": "grouped runs" },
        el("thead", {}, el("tr", {},
          keys.map((key) => el("th", { text: label(key) })),
          el("th", { text: "Runs", title: "runs in the group, whatever their status; n beside each mean counts the runs that have that figure" }),
          summarisedMeasures().map((m) => el("th", { title: m.description, text: `${m.label} mean ± sd` })))),
        el("tbody", {}, groups.map((group) => el("tr", {},
          values(group).map((value) => el("td", { text: value === null || value === undefined ? "–" : String(value) })),
          el("td", { class: "num", text: String(group.runs) }),
          summarisedMeasures().map((m) => el("td", { class: "num", text: cell(group.metrics[m.key], m.display_unit) })))))));
    } catch (error) {
      target.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
    }
  };
  for (const select of selects) select.addEventListener("change", show);
  container.replaceChildren(el("label", { for: "group-by-1", text: "Group by " }), selects[0], el("span", { text: " then by " }), selects[1], el("span", { text: " then by " }), selects[2]);
  return show;
}

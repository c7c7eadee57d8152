// The run table: server-paginated, sortable, filterable; keeps a selection across pages. Its
// default columns have their own cells; any other column the server lists (GET /runs/columns:
// every field of the run, its training, accelerator and techniques, and every figure) can be
// added, and is fetched with the page (`column=`) and sorted on the server.

import { API, getJson, query, describe } from "./api.js";
import { tagChips } from "./annotations.js";
import { el, fmtParams, formatValue, formatWhen } from "./format.js";
import { isoAreaDesigns } from "./iso-area.js";
import { progressBar } from "./progress.js";

export const FILTERS = [
  { key: "q", label: "Search", placeholder: "names, tags, notes" },
  { key: "experiment_id", label: "Experiment id", type: "number" },
  { key: "technique", label: "Technique", placeholder: "mercury" },
  { key: "model", label: "Model", placeholder: "mlp" },
  { key: "dataset", label: "Dataset", placeholder: "digits" },
  { key: "status", label: "Status", options: ["", "queued", "running", "done", "failed", "cancelled"] },
  { key: "accelerator", label: "Accelerator", placeholder: "edge" },
  { key: "param", label: "Swept value", placeholder: "mercury.signature_bits:16" },
  { key: "range", label: "Metric range", placeholder: "speedup:1.2:" },
];

const COLUMNS = [
  { key: "id", label: "Run", sort: "id", render: (r) => el("a", { href: `/runs/${r.id}`, text: `#${r.id}` }) },
  { key: "experiment_id", label: "Exp.", render: (r) => el("a", { href: `/experiments/${r.experiment_id}`, text: `#${r.experiment_id}` }) },
  { key: "technique", label: "Technique", sort: "technique" },
  { key: "model", label: "Model", sort: "model" },
  { key: "dataset", label: "Dataset", sort: "dataset" },
  { key: "accelerator_name", label: "Accelerator", sort: "accelerator_name" },
  { key: "status", label: "Status", sort: "status", render: statusWithAttempt },
  { key: "accuracy", label: "Accuracy", sort: "accuracy", num: true, render: accuracyCell },
  { key: "speedup", label: "Speedup", sort: "speedup", num: true, render: speedupCell },
  { key: "energy_ratio", label: "Energy ratio", sort: "energy_ratio", num: true, render: (r) => formatValue(r.energy_ratio, "×") },
  { key: "total_cycles", label: "Cycles", sort: "total_cycles", num: true, render: (r) => formatValue(r.total_cycles, "cycles") },
  { key: "energy_pj", label: "Energy", sort: "energy_pj", num: true, render: (r) => formatValue(r.energy_pj, "pJ") },
  { key: "seconds", label: "Time", sort: "seconds", num: true, render: (r) => formatValue(r.seconds, "s") },
  { key: "area_mm2", label: "Area", sort: "area_mm2", num: true, render: (r) => formatValue(r.area_mm2, "mm²") },
  { key: "params", label: "Swept values", render: (r) => fmtParams(r.params) },
  { key: "tags", label: "Tags", render: (r) => tagChips(r.tags) },
];

/** The speedup; a finished run whose baseline is not done yet says so and links it. */
export function speedupCell(run) {
  if (run.speedup !== null && run.speedup !== undefined) return formatValue(run.speedup, "×");
  if (run.status !== "done" || run.is_baseline || run.baseline_run_id === null) return "–";
  return el("a", {
    class: "waiting-baseline", href: `/runs/${run.baseline_run_id}`,
    title: "the speedup and energy ratio follow once this baseline run is done",
    text: `waiting for baseline #${run.baseline_run_id}`,
  });
}

/** The accuracy, with a flag when the run did not learn (below chance + the server's margin). */
export function accuracyCell(run) {
  if (!run.did_not_learn) return formatValue(run.accuracy, "%");
  return el("span", {}, el("span", { class: "badge failed", title: "test accuracy below chance + the did-not-learn margin", text: "did not learn" }), " ", formatValue(run.accuracy, "%"));
}

/** The status badge, progress while active, and the failure reason cut to fit a table cell
 * (`shortReason: false` leaves the reason to the caller, which shows it whole). */
export function statusCell(run, { shortReason = true } = {}) {
  const cell = el("span", { class: "status", dataset: { runStatus: run.status } }, el("span", { class: `badge ${run.status}`, text: run.status }));
  if (run.status === "running" || run.status === "queued") {
    // epoch, epochs, seconds_left: from the event stream or the run's `live` (not its list of epochs)
    const state = { fraction: run.progress ?? 0, epoch: run.epoch, seconds_left: run.seconds_left, epochs: Number.isInteger(run.epochs) ? run.epochs : undefined };
    cell.append(" ", progressBar(state, `run ${run.id} progress`));
  }
  if (shortReason && run.error && run.status !== "done") {
    cell.append(el("span", { class: "run-reason", title: run.error, text: run.error.length > 160 ? `${run.error.slice(0, 160)}…` : run.error }));
  }
  return cell;
}

/** The status, and which attempt it is once a run was retried. */
function statusWithAttempt(run) {
  const cell = statusCell(run);
  if (run.attempt > 1) cell.append(" ", el("span", { class: "attempt muted", title: "retried: earlier attempts are on the run's page", text: `attempt ${run.attempt}` }));
  return cell;
}

export const DEFAULT_COLUMNS = COLUMNS.map((c) => c.key);
const FINISHED = new Set(["done", "failed", "cancelled"]);

let catalogue = null;

/** Every column the server can give (GET /runs/columns), the defaults among them. */
export function loadColumns() {
  catalogue ??= getJson(`${API}/runs/columns`);
  return catalogue;
}

/** A cell of a column the table has no cell of its own for, written by its kind and unit. */
function cellText(value, column) {
  if (value === null || value === undefined) return "–";
  if (column.kind === "number") return formatValue(value, column.unit);
  if (column.kind === "bool") return value ? "yes" : "no";
  if (column.kind === "time") return formatWhen(value);
  if (column.key === "iso_area") return isoAreaDesigns(value);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A table column for a catalogue entry: the default's own cell where there is one. */
function tableColumn(entry) {
  const own = COLUMNS.find((c) => c.key === entry.key);
  if (own) return own;
  return {
    key: entry.key, label: entry.label, sort: entry.sortable ? entry.key : null, num: entry.kind === "number",
    extra: !entry.in_row, title: entry.description,
    render: (run) => cellText(entry.in_row ? run[entry.key] : run.columns?.[entry.key], entry),
  };
}

export class RunTable {
  constructor(container, { state, onChange, columns }) {
    this.container = container;
    this.state = { filters: {}, sort: "-id", limit: 50, offset: 0, ...state };
    this.selected = new Set();
    this.onChange = onChange || (() => {});
    this.rows = new Map();
    this.columns = columns || DEFAULT_COLUMNS;
  }

  /** Show these columns (keys): the defaults in their order, then the added ones in the order
   * given; redraws the current page, or loads it again when an added column needs its values. */
  setColumns(keys, entries = []) {
    this.columns = keys.length ? keys : DEFAULT_COLUMNS;
    for (const entry of entries) this.known.set(entry.key, tableColumn(entry));
    const missing = this.page && this.extraKeys().some((key) => !this.page.items.every((run) => key in (run.columns || {})));
    if (missing) return this.load();
    if (this.page) this.render();
    return Promise.resolve();
  }

  get known() {
    this._known ??= new Map(COLUMNS.map((col) => [col.key, col]));
    return this._known;
  }

  get shownColumns() {
    const defaults = COLUMNS.filter((col) => this.columns.includes(col.key));
    const added = this.columns.filter((key) => !DEFAULT_COLUMNS.includes(key) && this.known.has(key)).map((key) => this.known.get(key));
    return [...defaults, ...added];
  }

  /** The shown columns the server sends apart from the run row (`column=`). */
  extraKeys() {
    return this.shownColumns.filter((col) => col.extra).map((col) => col.key);
  }

  apiQuery(extra = {}) {
    return query({ ...this.state.filters, sort: this.state.sort, ...extra });
  }

  async load() {
    const { limit, offset } = this.state;
    this.container.setAttribute("aria-busy", "true");
    try {
      const page = await getJson(`${API}/runs${this.apiQuery({ limit, offset, column: this.extraKeys() })}`);
      this.page = page;
      this.render();
    } catch (error) {
      this.container.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
    } finally {
      this.container.removeAttribute("aria-busy");
      this.onChange(this);
    }
  }

  setFilters(filters) {
    this.state.filters = filters;
    this.state.offset = 0;
    return this.load();
  }

  sortBy(column) {
    const current = this.state.sort;
    this.state.sort = current === column ? `-${column}` : current === `-${column}` ? column : `-${column}`;
    this.state.offset = 0;
    return this.load();
  }

  /** A live update from the event stream: patch the row in place when it is on this page.
   * A run that finished is not patched: the event carries no metrics or reason, so the row
   * would show `done` with empty metrics; the caller reloads the page of runs instead. */
  updateRun(update) {
    const row = this.rows.get(update.id);
    if (!row || FINISHED.has(update.status)) return;
    const run = { ...row.run, ...update };
    row.run = run;
    row.statusCell.replaceChildren(statusWithAttempt(run));
  }

  render() {
    const { items, total, limit, offset } = this.page;
    this.rows.clear();
    const header = el("tr", {},
      el("th", {}, el("input", { type: "checkbox", "aria-label": "select all runs on this page", onchange: (e) => this.selectPage(e.target.checked) })),
      this.shownColumns.map((col) => el("th", { "aria-sort": this.ariaSort(col), title: col.title, dataset: { column: col.key } }, col.sort
        ? el("button", { type: "button", class: "sort", onclick: () => this.sortBy(col.sort), text: `${col.label}${this.arrow(col)}` })
        : col.label)));
    const body = el("tbody");
    for (const run of items) {
      const statusTd = el("td");
      const cells = this.shownColumns.map((col) => {
        const value = col.render ? col.render(run) : run[col.key];
        if (col.key === "status") { statusTd.append(value); return statusTd; }
        return el("td", { class: col.num ? "num" : "" }, value);
      });
      const box = el("input", {
        type: "checkbox", "aria-label": `select run ${run.id}`, checked: this.selected.has(run.id),
        onchange: (e) => this.toggle(run.id, e.target.checked),
      });
      body.append(el("tr", { dataset: { runId: String(run.id) } }, el("td", {}, box), cells));
      this.rows.set(run.id, { run, statusCell: statusTd });
    }
    const first = total ? offset + 1 : 0;
    const last = Math.min(offset + limit, total);
    const pager = el("div", { class: "pager" },
      el("button", { type: "button", disabled: offset === 0, onclick: () => this.goto(offset - limit), text: "‹ Previous" }),
      el("span", { class: "page-info", "aria-live": "polite", text: `${first}–${last} of ${total.toLocaleString("en-US")} runs` }),
      el("button", { type: "button", disabled: last >= total, onclick: () => this.goto(offset + limit), text: "Next ›" }),
      el("label", {}, "Rows per page ", el("select", { onchange: (e) => { this.state.limit = Number(e.target.value); this.goto(0); } },
        [25, 50, 100, 250].map((n) => el("option", { value: String(n), selected: n === limit, text: String(n) })))),
      el("span", { class: "muted selection-info", text: `${this.selected.size} selected` }));
    const table = el("table", { class: "data", "aria-label": "runs" }, el("thead", {}, header), body);
    this.container.replaceChildren(pager, el("div", { class: "table-scroll" }, table));
  }

  ariaSort(col) {
    if (!col.sort) return null;
    if (this.state.sort === col.sort) return "ascending";
    if (this.state.sort === `-${col.sort}`) return "descending";
    return "none";
  }

  arrow(col) {
    const sort = this.ariaSort(col);
    return sort === "ascending" ? " ▲" : sort === "descending" ? " ▼" : "";
  }

  goto(offset) {
    this.state.offset = Math.max(0, offset);
    return this.load();
  }

  toggle(id, on) {
    if (on) this.selected.add(id); else this.selected.delete(id);
    const info = this.container.querySelector(".selection-info");
    if (info) info.textContent = `${this.selected.size} selected`;
    this.onChange(this);
  }

  selectPage(on) {
    for (const box of this.container.querySelectorAll("tbody input[type=checkbox]")) {
      box.checked = on;
      this.toggle(Number(box.closest("tr").dataset.runId), on);
    }
  }
}

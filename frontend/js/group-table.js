// The compare page's summary: one row per design point (runs equal but for the seed), each figure
// the server declares summarised as its mean and 95% Student-t interval over seeds, sortable (by
// speedup, time, energy, energy-delay product, area, ...); a row's run count opens its runs. Above the table it names the
// fastest design point (least training time) and the most efficient (least training energy).

import { API, describe, getJson, query } from "./api.js";
import { el, formatEstimate, formatValue } from "./format.js";
import { loadFigures, summarisedMeasures } from "./figures.js";
import { isoAreaBudget, isoAreaDesigns } from "./iso-area.js";

// The describing columns, then each figure the server declares summarised (its mean over
// seeds), the iso-area designs beside the iso-area figures.
const DESCRIBING = [
  { key: "technique", label: "Technique", text: (g) => g.technique },
  { key: "accelerator", label: "Accelerator", text: (g) => g.accelerator_name },
  { key: "setting", label: "Swept values", text: (g) => setting(g) },
  { key: "baseline", label: "Compared with", text: (g) => (g.is_baseline ? "itself" : `${g.baseline_hardware} baseline`) },
  { key: "seeds", label: "Seeds", num: true, value: (g) => g.done },
];
const ISO_AREA_DESIGNS = { key: "iso_area", label: "Iso-area dense designs", text: (g) => isoAreaDesigns(g.iso_area), title: (g) => isoAreaBudget(g.iso_area) };

function columns() {
  const figures = summarisedMeasures().map((m) => ({
    key: m.key, label: m.label, num: true, lower: !m.higher_is_better, estimate: (g) => g[m.key], unit: m.display_unit, description: m.description,
  }));
  const lastIsoArea = figures.findLastIndex((c) => c.key.startsWith("iso_area_"));
  figures.splice(lastIsoArea === -1 ? figures.length : lastIsoArea + 1, 0, ISO_AREA_DESIGNS);
  return [...DESCRIBING, ...figures];
}

function setting(group) {
  return Object.entries(group.params || {})
    .filter(([key]) => !["technique", "accelerator"].includes(key))
    .map(([key, value]) => `${key}=${value}`).join(", ") || "–";
}

function estimateCell(estimate, column) {
  if (!estimate) return "–";
  if (estimate.ci_low === null) return `${formatValue(estimate.mean, column.unit)} (n = 1)`;
  const half = (estimate.ci_high - estimate.ci_low) / 2;
  return el("span", { title: `95% interval ${formatValue(estimate.ci_low, column.unit)} to ${formatValue(estimate.ci_high, column.unit)}, n = ${estimate.n}` },
    formatEstimate(estimate.mean, half, column.unit));
}

/** The design point with the least mean of `pick` (null when none has it). */
function least(groups, pick) {
  let best = null;
  for (const group of groups) {
    const mean = pick(group)?.mean;
    if (mean !== undefined && mean !== null && (best === null || mean < pick(best).mean)) best = group;
  }
  return best;
}

function pointName(group) {
  const swept = setting(group);
  return `${group.technique} on ${group.accelerator_name}${swept === "–" ? "" : ` (${swept})`}`;
}

/** "Fastest: …; most efficient: …", from the mean training time and energy over seeds. */
function leaders(groups) {
  const fastest = least(groups, (g) => g.seconds);
  const efficient = least(groups, (g) => g.energy_pj);
  if (!fastest && !efficient) return null;
  const parts = [];
  if (fastest) parts.push(`Fastest: ${pointName(fastest)}, ${formatValue(fastest.seconds.mean, "s")} for the training.`);
  if (efficient) parts.push(`Most efficient: ${pointName(efficient)}, ${formatValue(efficient.energy_pj.mean, "pJ")}.`);
  return el("p", { class: "leaders", id: "design-point-leaders", text: parts.join(" ") });
}

function sortValue(group, column) {
  if (column.estimate) return column.estimate(group)?.mean ?? -Infinity;
  if (column.value) return column.value(group);
  return column.text(group);
}

/** Draw the summary of the design points among `runs` (their experiments' groups) in `box`;
 * a shared dashboard passes its `given` groups, whose runs open no other page. */
export async function groupTable(box, runs, given = null) {
  if (!runs.length) {
    box.replaceChildren();
    return;
  }
  const experiments = [...new Set(runs.map((r) => r.experiment_id))];
  const chosen = new Set(runs.map((r) => r.id));
  let groups = given;
  if (!groups) try {
    const all = await getJson(`${API}/runs/groups${query({ experiment_id: experiments })}`);
    groups = all.filter((g) => g.run_ids.some((id) => chosen.has(id)));
  } catch (error) {
    box.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
    return;
  }
  await loadFigures().catch(() => null); // without it, the groups are described only
  const shown = columns();
  let sort = shown.some((c) => c.key === "speedup") ? { key: "speedup", descending: true } : { key: "technique", descending: false };
  const render = () => {
    const column = shown.find((c) => c.key === sort.key);
    const ordered = [...groups].sort((a, b) => {
      const x = sortValue(a, column), y = sortValue(b, column);
      const order = typeof x === "string" ? String(x).localeCompare(String(y)) : x - y;
      return sort.descending ? -order : order;
    });
    const header = el("tr", {}, shown.map((c) => el("th", { title: c.description, "aria-sort": c.key === sort.key ? (sort.descending ? "descending" : "ascending") : "none" },
      el("button", { type: "button", class: "sort", text: `${c.label}${c.key === sort.key ? (sort.descending ? " ▼" : " ▲") : ""}`,
        onclick: () => { sort = { key: c.key, descending: c.key === sort.key ? !sort.descending : Boolean(c.num) && !c.lower }; render(); } }))));
    const rows = ordered.map((g) => el("tr", { dataset: { group: g.key } }, shown.map((c) => {
      if (c.key === "seeds" && given) return el("td", { class: "num", text: `${g.done} of ${g.run_ids.length}` });
      if (c.key === "seeds") return el("td", { class: "num" }, el("a", { href: `/compare?ids=${g.run_ids.join(",")}`, title: "compare these runs", text: `${g.done} of ${g.run_ids.length}` }));
      return el("td", { class: c.num ? "num" : "", title: c.title ? c.title(g) : undefined }, c.estimate ? estimateCell(c.estimate(g), c) : c.text(g));
    })));
    box.replaceChildren(leaders(groups) ?? "", el("div", { class: "table-scroll" }, el("table", { class: "data", "aria-label": "design points over seeds" }, el("thead", {}, header), el("tbody", {}, rows))),
      el("p", { class: "hint", text: "One row per design point: runs equal in everything but the seed. Mean ± half-width of the 95% Student-t interval over seeds; Δ accuracy is paired with each seed's own baseline. Time, energy and their product (EDP) are the whole training's on the simulated accelerator; area is at 45 nm with the extensions the run uses." }));
  };
  render();
}

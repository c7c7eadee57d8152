// The compare page's summary: one row per design point (runs equal but for the seed), each metric
// as its mean and 95% Student-t interval over seeds, sortable (by speedup, time, energy,
// energy-delay product, area, ...); a row's run count opens its runs. Above the table it names the
// fastest design point (least training time) and the most efficient (least training energy).

import { API, describe, getJson, query } from "./api.js";
import { el, fmtNumber, fmtSeconds } from "./format.js";
import { isoAreaBudget, isoAreaDesigns } from "./iso-area.js";

const COLUMNS = [
  { key: "technique", label: "Technique", text: (g) => g.technique },
  { key: "accelerator", label: "Accelerator", text: (g) => g.accelerator_name },
  { key: "setting", label: "Swept values", text: (g) => setting(g) },
  { key: "baseline", label: "Compared with", text: (g) => (g.is_baseline ? "itself" : `${g.baseline_hardware} baseline`) },
  { key: "seeds", label: "Seeds", num: true, value: (g) => g.done },
  { key: "speedup", label: "Speedup, same array (×)", num: true, estimate: (g) => g.speedup, scale: 1, digits: 3 },
  { key: "stall_share", label: "Stall share", num: true, lower: true, estimate: (g) => g.stall_share, scale: 1, digits: 2 },
  { key: "baseline_stall_share", label: "Baseline stall share", num: true, lower: true, estimate: (g) => g.baseline_stall_share, scale: 1, digits: 2 },
  { key: "energy_ratio", label: "Energy ratio, same array", num: true, estimate: (g) => g.energy_ratio, scale: 1, digits: 3 },
  { key: "iso_area_speedup", label: "Iso-area speedup (×)", num: true, estimate: (g) => g.iso_area_speedup, scale: 1, digits: 3 },
  { key: "iso_area_energy_ratio", label: "Iso-area energy ratio", num: true, estimate: (g) => g.iso_area_energy_ratio, scale: 1, digits: 3 },
  { key: "iso_area", label: "Iso-area dense designs", text: (g) => isoAreaDesigns(g.iso_area), title: (g) => isoAreaBudget(g.iso_area) },
  { key: "seconds", label: "Time (ms)", num: true, lower: true, estimate: (g) => g.seconds, scale: 1e3, digits: 3 },
  { key: "seconds_per_step", label: "Time a step (µs)", num: true, lower: true, estimate: (g) => g.seconds_per_step, scale: 1e6, digits: 3 },
  { key: "energy_pj", label: "Energy (µJ)", num: true, lower: true, estimate: (g) => g.energy_pj, scale: 1e-6, digits: 3 },
  { key: "energy_delay", label: "EDP (µJ·ms)", num: true, lower: true, estimate: (g) => g.energy_delay, scale: 1e-3, digits: 3 },
  { key: "area_mm2", label: "Area (mm²)", num: true, lower: true, estimate: (g) => g.area_mm2, scale: 1, digits: 3 },
  { key: "accuracy", label: "Accuracy (%)", num: true, estimate: (g) => g.accuracy, scale: 100, digits: 2 },
  { key: "accuracy_delta", label: "Δ accuracy (pt)", num: true, estimate: (g) => g.accuracy_delta, scale: 100, digits: 2, signed: true },
];

function setting(group) {
  return Object.entries(group.params || {})
    .filter(([key]) => !["technique", "accelerator"].includes(key))
    .map(([key, value]) => `${key}=${value}`).join(", ") || "–";
}

function number(value, { digits, signed }) {
  const text = fmtNumber(value, digits);
  return signed && value > 0 ? `+${text}` : text;
}

function estimateCell(estimate, column) {
  if (!estimate) return "–";
  const mean = number(estimate.mean * column.scale, column);
  if (estimate.ci_low === null) return `${mean} (n = 1)`;
  const half = ((estimate.ci_high - estimate.ci_low) / 2) * column.scale;
  return el("span", { title: `95% interval ${number(estimate.ci_low * column.scale, column)} to ${number(estimate.ci_high * column.scale, column)}, n = ${estimate.n}` },
    `${mean} ± ${fmtNumber(half, column.digits)}`);
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
  if (fastest) parts.push(`Fastest: ${pointName(fastest)}, ${fmtSeconds(fastest.seconds.mean)} for the training.`);
  if (efficient) parts.push(`Most efficient: ${pointName(efficient)}, ${fmtNumber(efficient.energy_pj.mean / 1e6)} µJ.`);
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
  let sort = { key: "speedup", descending: true };
  const render = () => {
    const column = COLUMNS.find((c) => c.key === sort.key);
    const ordered = [...groups].sort((a, b) => {
      const x = sortValue(a, column), y = sortValue(b, column);
      const order = typeof x === "string" ? String(x).localeCompare(String(y)) : x - y;
      return sort.descending ? -order : order;
    });
    const header = el("tr", {}, COLUMNS.map((c) => el("th", { "aria-sort": c.key === sort.key ? (sort.descending ? "descending" : "ascending") : "none" },
      el("button", { type: "button", class: "sort", text: `${c.label}${c.key === sort.key ? (sort.descending ? " ▼" : " ▲") : ""}`,
        onclick: () => { sort = { key: c.key, descending: c.key === sort.key ? !sort.descending : Boolean(c.num) && !c.lower }; render(); } }))));
    const rows = ordered.map((g) => el("tr", { dataset: { group: g.key } }, COLUMNS.map((c) => {
      if (c.key === "seeds" && given) return el("td", { class: "num", text: `${g.done} of ${g.run_ids.length}` });
      if (c.key === "seeds") return el("td", { class: "num" }, el("a", { href: `/compare?ids=${g.run_ids.join(",")}`, title: "compare these runs", text: `${g.done} of ${g.run_ids.length}` }));
      return el("td", { class: c.num ? "num" : "", title: c.title ? c.title(g) : undefined }, c.estimate ? estimateCell(c.estimate(g), c) : c.text(g));
    })));
    box.replaceChildren(leaders(groups) ?? "", el("table", { class: "data", "aria-label": "design points over seeds" }, el("thead", {}, header), el("tbody", {}, rows)),
      el("p", { class: "hint", text: "One row per design point: runs equal in everything but the seed. Mean ± half-width of the 95% Student-t interval over seeds; Δ accuracy is paired with each seed's own baseline. Time, energy and their product (EDP) are the whole training's on the simulated accelerator; area is at 45 nm with the extensions the run uses." }));
  };
  render();
}

// Where each technique's cycles go, per accelerator: the PE array's work, the extension work the
// array's time does not hide, and stalls waiting for DRAM (total = the three, mean over runs).
// A technique that skips work but stalls on memory shows here why its speedup stayed small.

import { acceleratorLabel } from "../format.js";
import { baseLayout, emptyFigure, finished, groupBy } from "./common.js";

const PARTS = [
  ["array", "array", "#4c78a8"],
  ["exposed", "exposed extension", "#f58518"],
  ["stall", "stall (DRAM)", "#e45756"],
];

/** A run's cycles by kind; runs stored before the split count their compute cycles as array. */
function split(run) {
  const summary = run.summary || {};
  const array = summary.array_cycles ?? run.compute_cycles;
  const exposed = summary.exposed_extension_cycles ?? 0;
  return { array, exposed, stall: run.stall_cycles };
}

export default {
  id: "cycles",
  wide: true,
  title: "Cycles by kind: array, exposed extension, stall (per technique and accelerator)",
  build(runs) {
    const shown = finished(runs).filter((r) => r.total_cycles && r.compute_cycles !== null && r.stall_cycles !== null);
    if (!shown.length) return emptyFigure("no finished runs with a cycle breakdown");
    const groups = [...groupBy(shown, (r) => `${r.technique} @${acceleratorLabel(r)}`)];
    const mean = (items, key) => items.reduce((sum, r) => sum + split(r)[key], 0) / items.length;
    const data = PARTS.map(([key, name, color]) => ({
      type: "bar", orientation: "h", name, marker: { color },
      y: groups.map(([label]) => label),
      x: groups.map(([, items]) => mean(items, key)),
      customdata: groups.map(([, items]) => items.length),
      hovertemplate: `%{y}<br>${name}: %{x:,.0f} cycles<br>mean of %{customdata} run(s)<extra></extra>`,
    }));
    return {
      data,
      layout: baseLayout({
        barmode: "stack",
        height: Math.max(420, 120 + 22 * groups.length),
        margin: { l: 20, r: 20, t: 30, b: 60 },
        yaxis: { automargin: true, autorange: "reversed", type: "category" },
        xaxis: { title: { text: "cycles per training (mean over runs)" } },
        legend: { orientation: "h", x: 0, y: 1, yanchor: "bottom" },
      }),
    };
  },
};

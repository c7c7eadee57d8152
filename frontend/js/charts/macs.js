// MACs per technique: what the algorithm needs, what the array did, what the technique skipped, and
// the work it added (signatures, predictors): a technique that skips little and adds much is slower.

import { baseLayout, emptyFigure, finished, groupBy } from "./common.js";

const PARTS = [
  ["macs_algorithmic", "algorithmic", "#9d755d"],
  ["macs_actual", "actual", "#4c78a8"],
  ["macs_skipped", "skipped", "#54a24b"],
  ["macs_overhead", "overhead (added by the technique)", "#e45756"],
];

export default {
  id: "macs",
  title: "MACs: algorithmic, actual, skipped and overhead, per technique",
  build(runs) {
    const shown = finished(runs).filter((r) => r.macs_algorithmic !== null);
    if (!shown.length) return emptyFigure("no finished runs with MAC counts");
    const groups = [...groupBy(shown, (r) => r.technique)];
    const mean = (items, key) => items.reduce((sum, r) => sum + (r[key] ?? 0), 0) / items.length;
    const data = PARTS.map(([key, name, color]) => ({
      type: "bar", name, marker: { color },
      x: groups.map(([technique]) => technique),
      y: groups.map(([, items]) => mean(items, key)),
      customdata: groups.map(([, items]) => items.length),
      hovertemplate: `%{x}<br>${name}: %{y:.4s} MACs<br>mean of %{customdata} run(s)<extra></extra>`,
    }));
    return {
      data,
      layout: baseLayout({
        barmode: "group",
        xaxis: { title: { text: "technique" } },
        yaxis: { title: { text: "MACs per training (mean over runs)" } },
      }),
    };
  },
};

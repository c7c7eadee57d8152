// MACs per technique: every run measure the server declares in MACs (what the algorithm needs,
// what the array did, what the technique skipped, and the work it added: signatures, predictors):
// a technique that skips little and adds much is slower.

import { runMeasures } from "../figures.js";
import { baseLayout, emptyFigure, finished, groupBy } from "./common.js";

const COLOURS = ["#9d755d", "#4c78a8", "#54a24b", "#e45756", "#b279a2", "#f58518", "#72b7b2"];

/** Each declared MAC count: its key, its name in the legend ("MACs skipped" -> "skipped"), its colour. */
function parts() {
  return runMeasures().filter((m) => m.display_unit === "MACs")
    .map((m, i) => [m.key, m.label.replace(/^MACs /, ""), COLOURS[i % COLOURS.length], m.description]);
}

export default {
  id: "macs",
  title: "MACs: algorithmic, actual, skipped and overhead, per technique",
  build(runs) {
    const shown = finished(runs).filter((r) => r.macs_algorithmic !== null);
    if (!shown.length) return emptyFigure("no finished runs with MAC counts");
    const groups = [...groupBy(shown, (r) => r.technique)];
    const mean = (items, key) => items.reduce((sum, r) => sum + (r[key] ?? 0), 0) / items.length;
    const data = parts().map(([key, name, color, description]) => ({
      type: "bar", name, marker: { color },
      x: groups.map(([technique]) => technique),
      y: groups.map(([, items]) => mean(items, key)),
      customdata: groups.map(([, items]) => items.length),
      hovertemplate: `%{x}<br>${name}: %{y:.4s} MACs (${description})<br>mean of %{customdata} run(s)<extra></extra>`,
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

// Speedup against accuracy, one colour per technique, the Pareto front drawn and ringed.

import { formatValue } from "../format.js";
import { baseLayout, emptyFigure, finished, groupBy, hoverText, techniqueColor } from "./common.js";

export default {
  id: "pareto",
  title: "Speedup vs accuracy (Pareto front)",
  build(runs) {
    const points = finished(runs).filter((r) => r.speedup !== null && r.accuracy !== null);
    if (!points.length) return emptyFigure("no finished runs with speedup and accuracy");
    const data = [];
    for (const [technique, group] of groupBy(points, (r) => r.technique)) {
      data.push({
        type: "scatter", mode: "markers", name: technique,
        x: group.map((r) => r.speedup), y: group.map((r) => r.accuracy * 100),
        text: group.map((r) => hoverText(r, [
          `speedup: ${formatValue(r.speedup, "×")}`, `accuracy: ${formatValue(r.accuracy, "%")}`,
          `accuracy drop: ${formatValue(r.accuracy_drop, "pt")}`,
          r.on_front ? "<i>on the Pareto front</i>" : "",
        ])),
        hovertemplate: "%{text}<extra></extra>",
        marker: { size: 10, color: techniqueColor(technique), line: { width: 1, color: "#fff" } },
      });
    }
    const front = points.filter((r) => r.on_front).sort((a, b) => a.speedup - b.speedup);
    if (front.length) {
      data.push({
        type: "scatter", mode: "lines+markers", name: "Pareto front",
        x: front.map((r) => r.speedup), y: front.map((r) => r.accuracy * 100),
        line: { color: "#111", dash: "dot", shape: "hv", width: 1.5 },
        marker: { size: 16, color: "rgba(0,0,0,0)", line: { width: 2, color: "#111" } },
        hoverinfo: "skip",
      });
    }
    return {
      data,
      layout: baseLayout({
        xaxis: { title: { text: "speedup over baseline (×)" }, zeroline: false },
        yaxis: { title: { text: "test accuracy (%)" } },
      }),
    };
  },
};

// Speedup against accuracy per design point (runs equal but for the seed): the mean over seeds
// with its 95% interval as error bars, coloured by technique, shaped by accelerator; baselines
// drawn apart (open grey markers, never on the front); the front among the technique points
// drawn and ringed. The design points and the front come from the server (chart-data).

import { baseLayout, emptyFigure, groupBy, techniqueColor } from "./common.js";

const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "triangle-down", "pentagon", "hexagon", "cross"];
const BASELINE_COLOUR = "#555";

/** Error bar of an estimate in `scale` units (none for one seed). */
function errorBar(points, pick, scale) {
  const halves = points.map((p) => (pick(p).ci_high === null ? 0 : ((pick(p).ci_high - pick(p).ci_low) / 2) * scale));
  return { type: "data", array: halves, visible: true, thickness: 1.2, width: 3 };
}

function interval(estimate, scale, digits, unit = "") {
  const mean = (estimate.mean * scale).toFixed(digits);
  if (estimate.ci_high === null) return `${mean}${unit} (one seed)`;
  return `${mean}${unit} ± ${(((estimate.ci_high - estimate.ci_low) / 2) * scale).toFixed(digits)}${unit}`;
}

function hover(point) {
  const swept = Object.entries(point.params || {}).filter(([key]) => !["technique", "accelerator"].includes(key)).map(([k, v]) => `${k}: ${v}`);
  return [
    `<b>${point.technique} on ${point.accelerator_name}</b>`,
    `seeds ${point.seeds.join(", ")} (runs ${point.run_ids.map((id) => `#${id}`).join(", ")})`,
    `speedup: ${interval(point.speedup, 1, 3, "×")}`,
    `accuracy: ${interval(point.accuracy, 100, 2, "%")}`,
    point.accuracy_drop ? `accuracy drop: ${interval(point.accuracy_drop, 100, 2, " pts")}` : "",
    point.is_baseline ? "<i>baseline: the reference, not ranked</i>" : point.on_front ? "<i>on the Pareto front</i>" : "",
    ...swept,
  ].filter(Boolean).join("<br>");
}

function pointTrace(points, { name, colour, symbol, baseline }) {
  return {
    type: "scatter", mode: "markers", name, showlegend: false,
    x: points.map((p) => p.speedup.mean), y: points.map((p) => p.accuracy.mean * 100),
    error_x: { ...errorBar(points, (p) => p.speedup, 1), color: colour },
    error_y: { ...errorBar(points, (p) => p.accuracy, 100), color: colour },
    text: points.map(hover), hovertemplate: "%{text}<extra></extra>",
    customdata: points.map((p) => p.group),
    marker: baseline
      ? { size: 11, symbol: `${symbol}-open`, color: colour, line: { width: 2, color: colour } }
      : { size: 10, symbol, color: colour, line: { width: 1, color: "#fff" } },
    meta: { technique: points[0].technique, accelerator: points[0].accelerator_name, baseline },
  };
}

/** A legend-only entry: nothing plotted, the marker explains a colour or a shape. */
function key(name, group, title, marker) {
  return {
    type: "scatter", mode: "markers", x: [null], y: [null], name, hoverinfo: "skip",
    legendgroup: group, legendgrouptitle: { text: title }, marker: { size: 10, ...marker },
  };
}

export default {
  id: "pareto",
  title: "Speedup vs accuracy per design point (Pareto front)",
  build(runs, { designPoints = [] } = {}) {
    const points = designPoints.filter((p) => p.speedup !== null && p.accuracy !== null);
    if (!points.length) return emptyFigure("no finished runs with speedup and accuracy");
    const accelerators = [...new Set(points.map((p) => p.accelerator_name))].sort();
    const symbolOf = (accelerator) => SYMBOLS[accelerators.indexOf(accelerator) % SYMBOLS.length];
    const techniques = [...new Set(points.filter((p) => !p.is_baseline).map((p) => p.technique))];
    const data = [];
    for (const [, group] of groupBy(points, (p) => `${p.is_baseline}|${p.technique}|${p.accelerator_name}`)) {
      const { technique, accelerator_name: accelerator, is_baseline: baseline } = group[0];
      data.push(pointTrace(group, {
        name: `${baseline ? "baseline" : technique} on ${accelerator}`,
        colour: baseline ? BASELINE_COLOUR : techniqueColor(technique),
        symbol: symbolOf(accelerator), baseline,
      }));
    }
    const front = points.filter((p) => p.on_front).sort((a, b) => a.speedup.mean - b.speedup.mean);
    if (front.length) {
      data.push({
        type: "scatter", mode: "lines+markers", name: "Pareto front",
        x: front.map((p) => p.speedup.mean), y: front.map((p) => p.accuracy.mean * 100),
        line: { color: "#111", dash: "dot", shape: "hv", width: 1.5 },
        marker: { size: 18, color: "rgba(0,0,0,0)", line: { width: 2, color: "#111" } },
        hoverinfo: "skip", legendgroup: "front",
      });
    }
    data.push(...techniques.map((t) => key(t, "technique", "colour: technique", { symbol: "circle", color: techniqueColor(t) })));
    if (points.some((p) => p.is_baseline)) {
      data.push(key("baseline", "technique", "colour: technique", { symbol: "circle-open", color: BASELINE_COLOUR, line: { width: 2, color: BASELINE_COLOUR } }));
    }
    data.push(...accelerators.map((a) => key(a, "accelerator", "shape: accelerator", { symbol: symbolOf(a), color: "#888" })));
    return {
      data,
      layout: baseLayout({
        xaxis: { title: { text: "speedup over baseline (×), mean ± 95% interval over seeds" }, zeroline: false },
        yaxis: { title: { text: "test accuracy (%)" } },
        legend: { orientation: "h", y: -0.25, groupclick: "toggleitem" },
      }),
    };
  },
};

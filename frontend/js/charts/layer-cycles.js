// Per-layer cycles, compute vs stall, grouped by pass (FWD, BWD-DATA, BWD-WEIGHT); a menu picks the run.

import { runLabel } from "../format.js";
import { baseLayout, emptyFigure, finished } from "./common.js";

const PASS_NAMES = { fwd: "FWD", bwd_data: "BWD-DATA", bwd_weight: "BWD-WEIGHT" };

function layerRows(run) {
  const rows = new Map();
  for (const layer of run.layers) {
    const pass = PASS_NAMES[layer.training_pass] || layer.training_pass;
    const name = layer.role === "compute" ? layer.layer : `${layer.layer} (${layer.role})`;
    const key = `${pass}|${name}`;
    const row = rows.get(key) || { pass, name, compute: 0, stall: 0 };
    row.compute += layer.compute_cycles;
    row.stall += layer.stall_cycles;
    rows.set(key, row);
  }
  const order = Object.values(PASS_NAMES);
  return [...rows.values()].sort((a, b) => order.indexOf(a.pass) - order.indexOf(b.pass));
}

export default {
  id: "layer_cycles",
  title: "Per-layer cycles: compute vs stall",
  build(runs) {
    const shown = finished(runs).filter((r) => r.layers && r.layers.length);
    if (!shown.length) return emptyFigure("no finished runs with per-layer results");
    const data = [];
    shown.forEach((run, index) => {
      const rows = layerRows(run);
      const x = [rows.map((r) => r.pass), rows.map((r) => r.name)];
      for (const [part, color] of [["compute", "#4c78a8"], ["stall", "#e45756"]]) {
        data.push({
          type: "bar", name: `${part} cycles`, x, y: rows.map((r) => r[part]), visible: index === 0,
          marker: { color }, legendgroup: part, showlegend: true,
          hovertemplate: `${runLabel(run)}<br>%{x}<br>${part}: %{y:,} cycles<extra></extra>`,
        });
      }
    });
    const buttons = shown.map((run, index) => ({
      label: runLabel(run),
      method: "update",
      args: [{ visible: data.map((_, i) => Math.floor(i / 2) === index) }],
    }));
    return {
      data,
      layout: baseLayout({
        barmode: "stack",
        margin: { l: 70, r: 20, t: 40, b: 120 },
        // Vertical layer names: slanted ones reach left under the y axis's "0".
        xaxis: { type: "multicategory", tickangle: -90, automargin: true },
        yaxis: { title: { text: "cycles (whole training)" } },
        // Beside the plot: below it, long layer names (ResNet's "layer2.0.shortcut.0") reach it.
        legend: { orientation: "v", x: 1.01, xanchor: "left", y: 1, yanchor: "top" },
        updatemenus: shown.length > 1
          ? [{ buttons, direction: "down", x: 1, xanchor: "right", y: 1.15, yanchor: "top", showactive: true }]
          : [],
        annotations: shown.length === 1
          ? [{ text: runLabel(shown[0]), showarrow: false, x: 1, xref: "paper", y: 1.1, yref: "paper", xanchor: "right" }]
          : [],
      }),
    };
  },
};

// Energy per run, stacked by level (MAC, register, SRAM, DRAM) and, beside it, by operand: one
// horizontal bar per run, so the chart grows with the runs instead of crowding their labels.

import { runLabel } from "../format.js";
import { baseLayout, colorAt, emptyFigure, finished } from "./common.js";

const LEVELS = ["mac", "register", "sram", "dram"];
const OPERANDS = ["ifmap", "filter", "ofmap"];
const LEVEL_NAMES = { mac: "MAC", register: "register", sram: "SRAM", dram: "DRAM" };
const ROW_HEIGHT = 18;

export default {
  id: "energy",
  title: "Energy breakdown by level and operand",
  wide: true,
  build(runs) {
    const shown = finished(runs).filter((r) => r.summary && r.summary.energy_by_level);
    if (!shown.length) return emptyFigure("no finished runs with an energy breakdown");
    // Short labels on the axis (run and technique); the accelerator is in each bar's hover.
    const labels = shown.map((r) => `#${r.id} ${r.technique}`);
    const hovers = shown.map(runLabel);
    const microjoules = (pj) => (pj ?? 0) / 1e6;
    // Runs stored before the operand breakdown existed have none: then that panel is left out.
    const byOperand = shown.some((r) => r.summary.energy_by_operand);
    const data = [
      ...LEVELS.map((level, i) => ({
        type: "bar", orientation: "h", name: `level: ${LEVEL_NAMES[level]}`, y: labels, legendgroup: "level",
        x: shown.map((r) => microjoules(r.summary.energy_by_level[level])), customdata: hovers,
        marker: { color: colorAt(i) },
        hovertemplate: `%{customdata}<br>${LEVEL_NAMES[level]}: %{x:.4g} µJ<extra></extra>`,
      })),
      ...(byOperand ? OPERANDS : []).map((operand, i) => ({
        type: "bar", orientation: "h", name: `operand: ${operand}`, y: labels, xaxis: "x2", legendgroup: "operand",
        x: shown.map((r) => microjoules((r.summary.energy_by_operand || {})[operand])), customdata: hovers,
        marker: { color: colorAt(i + 5) },
        hovertemplate: `%{customdata}<br>${operand} data movement: %{x:.4g} µJ<extra></extra>`,
      })),
    ];
    return {
      data,
      layout: baseLayout({
        barmode: "stack",
        height: Math.max(420, 140 + ROW_HEIGHT * shown.length),
        margin: { l: 20, r: 20, t: 30, b: 60 },
        yaxis: { automargin: true, autorange: "reversed", type: "category" },
        xaxis: { domain: byOperand ? [0, 0.47] : [0, 1], title: { text: "energy (µJ), by level" } },
        ...(byOperand ? { xaxis2: { domain: [0.53, 1], title: { text: "µJ moved, by operand" }, anchor: "y" } } : {}),
        legend: { orientation: "h", x: 0, y: 1, yanchor: "bottom" },
      }),
    };
  },
};

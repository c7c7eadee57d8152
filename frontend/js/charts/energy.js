// Energy per run, stacked by level (MAC, register, SRAM, DRAM) and, beside it, by operand.

import { runLabel } from "../format.js";
import { baseLayout, colorAt, emptyFigure, finished } from "./common.js";

const LEVELS = ["mac", "register", "sram", "dram"];
const OPERANDS = ["ifmap", "filter", "ofmap"];
const LEVEL_NAMES = { mac: "MAC", register: "register", sram: "SRAM", dram: "DRAM" };

export default {
  id: "energy",
  title: "Energy breakdown by level and operand",
  build(runs) {
    const shown = finished(runs).filter((r) => r.summary && r.summary.energy_by_level);
    if (!shown.length) return emptyFigure("no finished runs with an energy breakdown");
    const labels = shown.map(runLabel);
    const microjoules = (pj) => (pj ?? 0) / 1e6;
    const data = [
      ...LEVELS.map((level, i) => ({
        type: "bar", name: `level: ${LEVEL_NAMES[level]}`, x: labels, legendgroup: "level",
        y: shown.map((r) => microjoules(r.summary.energy_by_level[level])),
        marker: { color: colorAt(i) },
        hovertemplate: `%{x}<br>${LEVEL_NAMES[level]}: %{y:.4g} µJ<extra></extra>`,
      })),
      ...OPERANDS.map((operand, i) => ({
        type: "bar", name: `operand: ${operand}`, x: labels, xaxis: "x2", yaxis: "y2", legendgroup: "operand",
        y: shown.map((r) => microjoules((r.summary.energy_by_operand || {})[operand])),
        marker: { color: colorAt(i + 5) },
        hovertemplate: `%{x}<br>${operand} data movement: %{y:.4g} µJ<extra></extra>`,
      })),
    ];
    return {
      data,
      layout: baseLayout({
        barmode: "stack",
        margin: { l: 60, r: 20, t: 40, b: 110 },
        xaxis: { domain: [0, 0.44], tickangle: -30, automargin: true },
        xaxis2: { domain: [0.58, 1], tickangle: -30, automargin: true, anchor: "y2" },
        yaxis: { title: { text: "energy (µJ), by level" } },
        yaxis2: { title: { text: "µJ moved, by operand" }, anchor: "x2" },
        legend: { orientation: "h", y: -0.45 },
      }),
    };
  },
};

// What every chart shares: colours per technique, a base layout, and the "nothing to show" figure.

import { runLabel } from "../format.js";
import { techniqueCount, techniqueIndex } from "../techniques.js";

const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b"];
// The server's techniques take the first colours in table order (loadTechniques() before drawing);
// composed labels share the rest, at least three of them, by a hash of the label.
const SHARED_COLOURS = 3;

export function techniqueColor(technique) {
  const reserved = Math.min(techniqueCount(), PALETTE.length - SHARED_COLOURS);
  const index = techniqueIndex(technique);
  if (index >= 0 && index < reserved) return PALETTE[index];
  let hash = 0;
  for (const char of technique) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return PALETTE[reserved + (hash % (PALETTE.length - reserved))];
}

export function colorAt(index) {
  return PALETTE[index % PALETTE.length];
}

export function baseLayout(extra = {}) {
  return {
    margin: { l: 60, r: 20, t: 30, b: 60 },
    font: { size: 11 },
    legend: { orientation: "h", y: -0.2 },
    hoverlabel: { align: "left" },
    ...extra,
  };
}

/** A figure that says why there is nothing to draw (no runs finished, metric not measured...). */
export function emptyFigure(message) {
  return {
    data: [],
    layout: baseLayout({
      xaxis: { visible: false },
      yaxis: { visible: false },
      annotations: [{ text: message, showarrow: false, x: 0.5, y: 0.5, xref: "paper", yref: "paper", font: { size: 13 } }],
    }),
  };
}

export const finished = (runs) => runs.filter((run) => run.status === "done");

export function hoverText(run, lines = []) {
  const params = Object.entries(run.params || {}).filter(([key]) => key !== "technique").map(([k, v]) => `${k}: ${v}`);
  return [`<b>${runLabel(run)}</b>`, `${run.model} / ${run.dataset}`, ...lines, ...params].join("<br>");
}

export function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    const value = key(item);
    if (!groups.has(value)) groups.set(value, []);
    groups.get(value).push(item);
  }
  return groups;
}

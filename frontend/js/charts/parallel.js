// Parallel coordinates over the swept parameters and the outcomes (speedup, accuracy, energy).

import { baseLayout, emptyFigure, finished } from "./common.js";

const OUTCOMES = [
  ["speedup", "speedup (×)"],
  ["accuracy", "accuracy (%)", 100],
  ["energy_ratio", "energy / baseline"],
];

// Numbers that name a choice rather than measure a quantity: one axis tick per value.
const CATEGORICAL = new Set(["seed"]);
const isNumber = (text) => text.trim() !== "" && Number.isFinite(Number(text));

/** Categories in reading order: numbers by value (8, 16, 32), then text ("–" for unset). */
function categoryOrder(a, b) {
  if (isNumber(a) && isNumber(b)) return Number(a) - Number(b);
  if (isNumber(a) !== isNumber(b)) return isNumber(a) ? -1 : 1;
  return a.localeCompare(b);
}

function dimension(label, values, categorical = false) {
  const numeric = values.every((v) => typeof v === "number" || typeof v === "boolean" || v === null);
  if (numeric && !categorical) return { label, values: values.map((v) => (v === null ? NaN : Number(v))) };
  const categories = [...new Set(values.map(String))].sort(categoryOrder);
  return {
    label,
    values: values.map((v) => categories.indexOf(String(v))),
    tickvals: categories.map((_, i) => i),
    ticktext: categories,
  };
}

/** "rows (accelerator)" from "accelerator.rows": the field first, so labels stay short. */
function axisLabel(key) {
  const [group, ...rest] = key.split(".");
  return rest.length ? `${rest.join(".")} (${group})` : key;
}

export default {
  id: "parallel",
  title: "Parallel coordinates over sweep parameters",
  wide: true,
  build(runs) {
    const shown = finished(runs).filter((r) => r.speedup !== null);
    if (!shown.length) return emptyFigure("no finished runs to compare");
    const valueOf = (run, key) => (key === "accelerator" ? run.accelerator_name : run.params[key] ?? "–");
    const varies = (key) => new Set(shown.map((r) => JSON.stringify(valueOf(r, key)))).size > 1;
    // Only what changes between the shown runs: swept values, technique, accelerator.
    const keys = [...new Set(["accelerator", ...shown.flatMap((r) => Object.keys(r.params || {}))])].sort().filter(varies);
    const dimensions = [
      ...keys.map((key) => dimension(axisLabel(key), shown.map((r) => valueOf(r, key)), CATEGORICAL.has(key))),
      ...OUTCOMES.map(([key, label, scale = 1]) => dimension(label, shown.map((r) => (r[key] === null ? null : scale * r[key])))),
    ];
    return {
      data: [{
        type: "parcoords",
        dimensions,
        line: { color: shown.map((r) => r.speedup), colorscale: "Viridis", showscale: true, colorbar: { title: { text: "speedup" } } },
      }],
      layout: baseLayout({ margin: { l: 70, r: 90, t: 70, b: 30 } }),
    };
  },
};

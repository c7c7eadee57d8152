// Checkboxes choosing which charts a comparison or dashboard shows.

import { el } from "./format.js";
import { CHARTS } from "./charts/registry.js";

export function chartPicker(fieldset, chosen, onChange) {
  for (const chart of CHARTS) {
    const id = `chart-${chart.id}`;
    const box = el("input", { type: "checkbox", id, value: chart.id, checked: chosen.includes(chart.id) });
    box.addEventListener("change", () => onChange(selectedCharts(fieldset)));
    fieldset.append(el("label", { for: id }, box, ` ${chart.title}`));
  }
}

export function selectedCharts(fieldset) {
  return [...fieldset.querySelectorAll("input:checked")].map((box) => box.value);
}

// A run's iso-area comparison in words: which dense designs of equal or smaller area (its array
// with the extensions off, dense storage, same clock, dataflow and node; rows, columns and SRAMs
// varied over a grid: backend/sim/iso_area.py) it is compared with.

import { formatValue } from "./format.js";

function design(d) {
  return `${d.rows}×${d.cols}, ${d.ifmap_sram_kib}/${d.filter_sram_kib}/${d.ofmap_sram_kib} KiB, ${formatValue(d.area_mm2, "mm²")}`;
}

/** "fastest: …; least energy: …" (rows × columns, ifmap/filter/ofmap SRAM, area) of an iso-area record (the API's IsoAreaOut), or "–". */
export function isoAreaDesigns(iso) {
  if (!iso) return "–";
  const same = JSON.stringify(iso.fastest) === JSON.stringify(iso.lowest_energy);
  return same
    ? `fastest, least energy: ${design(iso.fastest)}`
    : `fastest: ${design(iso.fastest)}; least energy: ${design(iso.lowest_energy)}`;
}

/** What the design text leaves out: the budget and how many designs it was chosen from. */
export function isoAreaBudget(iso) {
  if (!iso) return undefined;
  return `${iso.within_area} of ${iso.candidates} dense designs within the run's ${formatValue(iso.area_budget_mm2, "mm²")}`;
}

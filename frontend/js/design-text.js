// How a searched design's numbers read: its figures (time, energy, area as the server declares
// them, GET /searches/{id}/sample `measures`), its total SRAM and its searched accelerator fields
// (in the unit each declares in the API's JSON schema), each through the project's number
// formatter.

import { formatValue } from "./format.js";

// The formatter's unit for each unit the search's figures are stored in, and the factor to it.
const FORMAT_UNIT = { s: ["s", 1], J: ["pJ", 1e12], "mm²": ["mm²", 1], KiB: ["bytes", 1024] };

export const FIGURE_LABEL = { time_s: "time", energy_j: "energy", area_mm2: "area", sram_kib: "SRAM" };
export const FIGURE_UNIT = { time_s: "s", energy_j: "J", area_mm2: "mm²", sram_kib: "KiB" };

/** A figure (time_s, energy_j, area_mm2, sram_kib) in its stored unit, for people. */
export function figureText(key, value) {
  const [unit, factor] = FORMAT_UNIT[FIGURE_UNIT[key]];
  return formatValue(typeof value === "number" ? value * factor : value, unit);
}

/** A searched field's value in its declared `unit`: one the formatter scales (KiB: in bytes'
 * steps) through it, any other written after the number. */
export function fieldText(value, unit) {
  if (typeof value !== "number") return String(value);
  if (unit in FORMAT_UNIT) {
    const [formatted, factor] = FORMAT_UNIT[unit];
    return formatValue(value * factor, formatted);
  }
  return unit ? `${formatValue(value)} ${unit}` : formatValue(value);
}

/** "time: 1.23 s": one line of a design's hover label or facts. */
export const figureLine = (key, value) => `${FIGURE_LABEL[key]}: ${figureText(key, value)}`;

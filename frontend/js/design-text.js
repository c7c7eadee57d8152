// How a searched design's numbers read: its figures (time, energy, area as the server declares
// them, GET /searches/{id}/sample `measures`), its total SRAM and its searched accelerator fields,
// each through the project's number formatter.

import { formatValue } from "./format.js";

// The formatter's unit for each unit the search's figures are stored in, and the factor to it.
const FORMAT_UNIT = { s: ["s", 1], J: ["pJ", 1e12], "mm²": ["mm²", 1], KiB: ["bytes", 1024] };
const FIELD_UNIT = { clock_mhz: "MHz", dram_bandwidth: "words/cycle" };

export const FIGURE_LABEL = { time_s: "time", energy_j: "energy", area_mm2: "area", sram_kib: "SRAM" };
export const FIGURE_UNIT = { time_s: "s", energy_j: "J", area_mm2: "mm²", sram_kib: "KiB" };

/** A figure (time_s, energy_j, area_mm2, sram_kib) in its stored unit, for people. */
export function figureText(key, value) {
  const [unit, factor] = FORMAT_UNIT[FIGURE_UNIT[key]];
  return formatValue(typeof value === "number" ? value * factor : value, unit);
}

/** A searched field's value: SRAM sizes in bytes' steps, clock and bandwidth with their units. */
export function fieldText(path, value) {
  if (typeof value !== "number") return String(value);
  if (path.endsWith("_sram_kib")) return formatValue(value * 1024, "bytes");
  const unit = FIELD_UNIT[path];
  return unit ? `${formatValue(value)} ${unit}` : formatValue(value);
}

/** "time: 1.23 s": one line of a design's hover label or facts. */
export const figureLine = (key, value) => `${FIGURE_LABEL[key]}: ${figureText(key, value)}`;

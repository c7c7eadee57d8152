// Which of a search's kept designs meet the design-space page's bounds, and what they answer.
//
// The points are the sample answer of a search (GET /searches/{id}/sample): per technique label,
// columns time_s, energy_j, area_mm2 and `row` (the design's row in `designs`, whose sram_kib
// is its total SRAM). A point meets the bounds when each of its figures is at most the bound
// set for it (a bound of null is no bound). Of those, per technique:
// - the fastest: least time, ties to less energy, then less area, then the lower design index;
// - the time-area front: each point no other is both faster and no larger than (sorted by
//   area), the fastest design within every area budget.

export const BOUNDS = ["area_mm2", "time_s", "energy_j", "sram_kib"];

/** The value of `bound` at point `p` of a technique's series. */
function valueAt(sample, series, bound, p) {
  return bound === "sram_kib" ? sample.designs.sram_kib[series.row[p]] : series[bound][p];
}

/** Positions (into the technique's columns) of the points meeting every bound in `limits`. */
export function withinBounds(sample, label, limits) {
  const series = sample.techniques[label];
  const active = BOUNDS.filter((bound) => limits[bound] !== null && limits[bound] !== undefined);
  const kept = [];
  for (let p = 0; p < series.row.length; p += 1) {
    if (active.every((bound) => valueAt(sample, series, bound, p) <= limits[bound])) kept.push(p);
  }
  return kept;
}

/** The design number of point `p`. */
export const designIndex = (sample, label, p) => sample.designs.index[sample.techniques[label].row[p]];

function faster(sample, label, a, b) {
  const s = sample.techniques[label];
  for (const column of ["time_s", "energy_j", "area_mm2"]) {
    if (s[column][a] !== s[column][b]) return s[column][a] < s[column][b];
  }
  return designIndex(sample, label, a) < designIndex(sample, label, b);
}

/** The fastest of `positions` (see above), or null when there is none. */
export function fastest(sample, label, positions) {
  let best = null;
  for (const p of positions) if (best === null || faster(sample, label, p, best)) best = p;
  return best;
}

/** The time-area front of `positions`, by growing area (and shrinking time). */
export function timeAreaFront(sample, label, positions) {
  const s = sample.techniques[label];
  const byArea = [...positions].sort((a, b) => s.area_mm2[a] - s.area_mm2[b] || s.time_s[a] - s.time_s[b]);
  const front = [];
  let bestTime = Infinity;
  for (const p of byArea) {
    if (s.time_s[p] < bestTime) {
      front.push(p);
      bestTime = s.time_s[p];
    }
  }
  return front;
}

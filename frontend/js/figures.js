// The figures a run is judged by, as the server declares them (GET /api/v1/figures): every
// training's epoch figures and each technique's, and the measures of a run and of a layer-pass
// (backend/specs/figures.py), with labels, units, how each is totalled and whether group
// summaries show it. Public like the technique table, so shared dashboards read it too.

let cached = null;
let epoch = [];
let measures = [];

export async function loadFigures() {
  cached ??= fetch("/api/v1/figures", { headers: { Accept: "application/json" } })
    .then((response) => {
      if (!response.ok) throw new Error(`the figure list did not load (HTTP ${response.status})`);
      return response.json();
    })
    .then((figures) => {
      epoch = figures.epoch;
      measures = figures.measures;
      return figures;
    });
  return cached;
}

/** The epoch figures in the server's order (empty before loadFigures() resolved). */
export function epochFigures() {
  return epoch;
}

/** A run's stored measures, in the server's order (empty before loadFigures() resolved). */
export function runMeasures() {
  return measures.filter((m) => m.per_run && m.stored);
}

/** A layer-pass's measures, in the server's order. */
export function layerMeasures() {
  return measures.filter((m) => m.per_layer);
}

/** The figures group summaries show (a mean over runs each), in the server's order. */
export function summarisedMeasures() {
  return measures.filter((m) => m.per_run && m.summarised);
}

// The figures a run is judged by, as the server declares them (GET /api/v1/figures): every
// training's epoch figures and each technique's, with labels and units. Public like the technique
// table, so shared dashboards read it too.

let cached = null;
let epoch = [];

export async function loadFigures() {
  cached ??= fetch("/api/v1/figures", { headers: { Accept: "application/json" } })
    .then((response) => {
      if (!response.ok) throw new Error(`the figure list did not load (HTTP ${response.status})`);
      return response.json();
    })
    .then((figures) => {
      epoch = figures.epoch;
      return figures;
    });
  return cached;
}

/** The epoch figures in the server's order (empty before loadFigures() resolved). */
export function epochFigures() {
  return epoch;
}

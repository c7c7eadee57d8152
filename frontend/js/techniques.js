// The technique table (GET /api/v1/techniques): each technique's name, label and knob schema, in
// the server's order. Public like the OpenAPI schema, so shared dashboards read it too.

let cached = null;
let order = [];

export async function loadTechniques() {
  cached ??= fetch("/api/v1/techniques", { headers: { Accept: "application/json" } })
    .then((response) => {
      if (!response.ok) throw new Error(`the technique list did not load (HTTP ${response.status})`);
      return response.json();
    })
    .then((techniques) => {
      order = techniques.map((technique) => technique.name);
      return techniques;
    });
  return cached;
}

export function techniqueCount() {
  return order.length;
}

/** A technique's place in the server's table; -1 for a composed label or before loading. */
export function techniqueIndex(name) {
  return order.indexOf(name);
}

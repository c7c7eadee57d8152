// Reading the API's JSON schema (/api/openapi.json): components by name, nullable unwrapping, the
// units fields declare.

let cached = null;

export async function loadSchemas() {
  cached ??= fetch("/api/openapi.json").then((r) => r.json()).then((doc) => doc.components.schemas);
  return cached;
}

export function refName(schema) {
  return schema && schema.$ref ? schema.$ref.split("/").pop() : null;
}

/** {schema, nullable}: `X | None` fields are anyOf [X, null] in the schema. */
export function unwrap(schema) {
  if (schema && Array.isArray(schema.anyOf)) {
    const others = schema.anyOf.filter((s) => s.type !== "null");
    if (others.length === 1 && others.length < schema.anyOf.length) {
      return { schema: { ...others[0], default: schema.default, description: schema.description, title: schema.title }, nullable: true };
    }
  }
  return { schema, nullable: false };
}

export function defaultOf(prop, schemas) {
  if (prop.default !== undefined) return prop.default;
  const name = refName(prop);
  if (name && schemas[name]) {
    const nested = {};
    for (const [key, sub] of Object.entries(schemas[name].properties || {})) nested[key] = defaultOf(sub, schemas);
    return nested;
  }
  return undefined;
}

/** The unit each field of component `name` declares ("unit" in its schema), by dotted path into
 * its nested objects: {clock_mhz: "MHz", "mcache.projection_macs_per_cycle": "MACs/cycle", …}. */
export function fieldUnits(schemas, name, prefix = "") {
  const units = {};
  for (const [key, prop] of Object.entries(schemas[name]?.properties || {})) {
    const nested = refName(prop);
    if (nested) Object.assign(units, fieldUnits(schemas, nested, `${prefix}${key}.`));
    else if (prop.unit) units[prefix + key] = prop.unit;
  }
  return units;
}

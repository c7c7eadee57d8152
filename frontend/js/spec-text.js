// A spec as YAML or JSON text and back, read and written as the CLI does (PyYAML's YAML 1.1:
// `yes` is a boolean, `1e3` a string), with js-yaml (frontend/vendor/README.md).

import { COLLECTION_STYLE, YAML11_SCHEMA, dump, load, visit } from "../vendor/js-yaml/js-yaml.js";

/** Lists of plain values on one line (`seeds: [0, 1, 2]`), as the examples write them. */
function flowScalarLists(documents) {
  visit(documents, (node) => {
    if (node.kind === "sequence" && node.items.length && node.items.every((item) => item.kind === "scalar")) node.style = COLLECTION_STYLE.FLOW;
  });
}

export function specText(spec, format) {
  if (format === "json") return JSON.stringify(spec, null, 2);
  return dump(spec, { schema: YAML11_SCHEMA, lineWidth: -1, transform: flowScalarLists });
}

/** The spec a YAML or JSON text holds; an Error saying where the text is wrong otherwise. */
export function parseSpec(text) {
  let spec;
  try {
    spec = load(text, { schema: YAML11_SCHEMA });
  } catch (error) {
    throw new Error(`not YAML or JSON: ${error.message}`);
  }
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) {
    throw new Error("a spec is a mapping (name, techniques, accelerators, …), not a single value or a list");
  }
  return spec;
}

// Form fields generated from a JSON schema object: labelled inputs with defaults and limits shown,
// read back as only the values that differ from the defaults.

import { el } from "./format.js";
import { defaultOf, refName, unwrap } from "./schema.js";

export const fieldId = (path) => `f-${path.replace(/[^a-zA-Z0-9_-]/g, "-")}`;

function showDefault(value) {
  if (value === null || value === undefined) return "none";
  if (Array.isArray(value)) return value.length ? value.join(", ") : "empty";
  return String(value);
}

function limits(schema) {
  const parts = [];
  if (schema.minimum !== undefined) parts.push(`≥ ${schema.minimum}`);
  if (schema.exclusiveMinimum !== undefined) parts.push(`> ${schema.exclusiveMinimum}`);
  if (schema.maximum !== undefined) parts.push(`≤ ${schema.maximum}`);
  if (schema.exclusiveMaximum !== undefined) parts.push(`< ${schema.exclusiveMaximum}`);
  return parts.join(", ");
}

function input(path, schema, nullable, value) {
  const id = fieldId(path);
  const common = { id, name: path, dataset: { path } };
  if (schema.enum) {
    return el("select", common,
      nullable ? el("option", { value: "", text: "none" }) : null,
      schema.enum.map((option) => el("option", { value: String(option), selected: option === value, text: String(option) })));
  }
  if (schema.type === "boolean") return el("input", { ...common, type: "checkbox", checked: Boolean(value) });
  if (schema.type === "integer" || schema.type === "number") {
    const attrs = { ...common, type: "number", step: schema.type === "integer" ? "1" : "any", value: value ?? "", placeholder: nullable ? "none" : "" };
    if (schema.minimum !== undefined) attrs.min = String(schema.minimum);
    if (schema.maximum !== undefined) attrs.max = String(schema.maximum);
    if (!nullable) attrs.required = true;
    return el("input", attrs);
  }
  if (schema.type === "array") {
    return el("input", { ...common, type: "text", value: (value || []).join(", "), placeholder: "comma-separated" });
  }
  return el("input", { ...common, type: "text", value: value ?? "", maxlength: schema.maxLength, required: !nullable && schema.minLength ? true : null, placeholder: nullable ? "none" : "" });
}

/** A fieldset with one labelled field per property; nested objects fold into <details>. */
export function objectFields(schemas, name, prefix, { skip = [], values = {} } = {}) {
  const schema = schemas[name];
  const nodes = [];
  for (const [key, raw] of Object.entries(schema.properties || {})) {
    if (skip.includes(key)) continue;
    const path = `${prefix}.${key}`;
    const nested = refName(raw);
    if (nested && schemas[nested] && schemas[nested].type === "object") {
      nodes.push(el("details", { class: "nested" }, el("summary", { text: raw.title || schemas[nested].title || key }),
        el("fieldset", { dataset: { path } }, el("legend", { text: raw.title || schemas[nested].title || key }),
          schemas[nested].description ? el("p", { class: "hint", text: schemas[nested].description }) : null,
          objectFields(schemas, nested, path, { values: values[key] || {} }))));
      continue;
    }
    const { schema: prop, nullable } = unwrap(raw);
    const def = defaultOf(raw, schemas) ?? (prop.type === "array" ? [] : undefined);
    const value = values[key] !== undefined ? values[key] : def;
    const control = input(path, prop, nullable, value);
    const label = el("label", { for: control.id, text: prop.title || key });
    const hint = [prop.description, `default: ${showDefault(def)}`, limits(prop)].filter(Boolean).join(" · ");
    const wrapper = el("div", { class: prop.type === "boolean" ? "field check" : "field", dataset: { path, kind: prop.type || (prop.enum ? "enum" : "string") } });
    if (prop.type === "boolean") wrapper.append(control, label);
    else wrapper.append(label, control);
    wrapper.append(el("span", { class: "hint", text: hint }), el("span", { class: "error", id: `${control.id}-error`, "aria-live": "polite" }));
    wrapper.dataset.default = JSON.stringify(def ?? null);
    wrapper.dataset.nullable = String(nullable);
    nodes.push(wrapper);
  }
  return nodes;
}

function readField(wrapper) {
  const control = wrapper.querySelector("input, select");
  const kind = wrapper.dataset.kind;
  const nullable = wrapper.dataset.nullable === "true";
  if (control.type === "checkbox") return control.checked;
  const text = control.value.trim();
  if (text === "") return nullable ? null : kind === "array" ? [] : kind === "string" ? "" : undefined;
  if (kind === "integer" || kind === "number") return Number(text);
  if (kind === "array") return text.split(",").map((s) => s.trim()).filter(Boolean);
  return text;
}

/** The values under `prefix` that differ from their defaults or were written in the spec the
 * form was opened from (`data-written`), nested like the schema. */
export function readChanged(root, prefix) {
  const out = {};
  for (const wrapper of root.querySelectorAll(`.field[data-path^="${prefix}."]`)) {
    const value = readField(wrapper);
    if (value === undefined) continue;
    if (JSON.stringify(value) === wrapper.dataset.default && wrapper.dataset.written !== "true") continue;
    const parts = wrapper.dataset.path.slice(prefix.length + 1).split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) node = node[part] ??= {};
    node[parts.at(-1)] = value;
  }
  return out;
}

/** Read every value under `prefix`, defaults included (for a full custom accelerator). */
export function readAll(root, prefix) {
  const out = {};
  for (const wrapper of root.querySelectorAll(`.field[data-path^="${prefix}."]`)) {
    const value = readField(wrapper);
    if (value === undefined) continue;
    const parts = wrapper.dataset.path.slice(prefix.length + 1).split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) node = node[part] ??= {};
    node[parts.at(-1)] = value;
  }
  return out;
}

/** Set fields under `prefix` from a nested object (e.g. fill the custom accelerator from a preset). */
export function fill(root, prefix, values) {
  for (const [key, value] of Object.entries(values)) {
    const path = `${prefix}.${key}`;
    if (value && typeof value === "object" && !Array.isArray(value)) {
      fill(root, path, value);
      continue;
    }
    const control = root.querySelector(`#${CSS.escape(fieldId(path))}`);
    if (!control) continue;
    if (control.type === "checkbox") control.checked = Boolean(value);
    else control.value = Array.isArray(value) ? value.join(", ") : value ?? "";
  }
}

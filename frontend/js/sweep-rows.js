// Sweep axes: one row per swept path, given as a list of values, a range, or an interval.

import { el } from "./format.js";

let counter = 0;

export function sweepRow(paths, initial = {}) {
  counter += 1;
  const n = counter;
  const id = (name) => `sweep-${name}-${n}`;
  const field = (name, label, attrs = {}) => el("div", { class: "field", dataset: { sweepField: name } },
    el("label", { for: id(name), text: label }), el("input", { id: id(name), name: `sweep-${name}`, ...attrs }));
  const kind = el("select", { id: id("kind"), name: "sweep-kind" },
    ["values", "range", "interval"].map((k) => el("option", { value: k, text: k, selected: k === (initial.kind || "values") })));
  const row = el("fieldset", { class: "sweep-row", dataset: { sweepRow: String(n) } },
    el("legend", { text: `Axis ${n}` }),
    el("div", { class: "error", role: "alert" }),
    field("path", "Parameter path", { type: "text", list: "sweep-paths", value: initial.path || "", placeholder: "mercury.signature_bits", required: true }),
    el("div", { class: "field" }, el("label", { for: id("kind"), text: "Axis kind" }), kind),
    field("values", "Values", { type: "text", value: initial.values || "", placeholder: "8, 16, 24" }),
    field("start", "Start", { type: "number", step: "any" }),
    field("stop", "Stop", { type: "number", step: "any" }),
    field("step", "Step", { type: "number", step: "any", min: "0" }),
    field("low", "Low", { type: "number", step: "any" }),
    field("high", "High", { type: "number", step: "any" }),
    el("div", { class: "field check" }, el("input", { id: id("integer"), name: "sweep-integer", type: "checkbox" }), el("label", { for: id("integer"), text: "Integers" })),
    el("div", { class: "field check", dataset: { sweepField: "log" } }, el("input", { id: id("log"), name: "sweep-log", type: "checkbox" }), el("label", { for: id("log"), text: "Log scale" })),
    el("button", { type: "button", class: "danger", text: "Remove axis", onclick: () => { const form = row.form; row.remove(); form?.dispatchEvent(new Event("input")); } }));
  const show = () => {
    const k = kind.value;
    for (const node of row.querySelectorAll("[data-sweep-field]")) {
      const name = node.dataset.sweepField;
      node.hidden = name !== "path" && !({ values: ["values"], range: ["start", "stop", "step"], interval: ["low", "high", "log"] }[k].includes(name));
    }
  };
  kind.addEventListener("change", show);
  show();
  if (!document.getElementById("sweep-paths")) {
    document.body.append(el("datalist", { id: "sweep-paths" }, paths.map((p) => el("option", { value: p }))));
  }
  return row;
}

function parseValue(text) {
  if (/^(true|false)$/i.test(text)) return text.toLowerCase() === "true";
  const number = Number(text);
  return text !== "" && !Number.isNaN(number) ? number : text;
}

/** {path: axis} from the rows; client-side problems as [{loc, msg}]. */
export function readSweep(container) {
  const parameters = {};
  const errors = [];
  for (const row of container.querySelectorAll("[data-sweep-row]")) {
    const get = (name) => row.querySelector(`[name=sweep-${name}]`);
    const path = get("path").value.trim();
    if (!path) continue;
    const axis = {};
    const kind = get("kind").value;
    if (kind === "values") {
      axis.values = get("values").value.split(",").map((s) => s.trim()).filter(Boolean).map(parseValue);
      if (!axis.values.length) errors.push({ loc: ["sweep", "parameters", path], msg: "give at least one value" });
    } else {
      const names = kind === "range" ? ["start", "stop", "step"] : ["low", "high"];
      for (const name of names) {
        const text = get(name).value.trim();
        if (text === "") errors.push({ loc: ["sweep", "parameters", path], msg: `${name} is required for a ${kind}` });
        else axis[name] = Number(text);
      }
      if (kind === "interval" && get("log").checked) axis.log = true;
    }
    if (get("integer").checked) axis.integer = true;
    parameters[path] = axis;
  }
  return { parameters, errors };
}

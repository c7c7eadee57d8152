// Put validation messages (the browser's or the server's 422) next to the fields they name.

import { el } from "./format.js";

export function clearErrors(form, box) {
  for (const node of form.querySelectorAll(".error")) node.textContent = "";
  for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  box.replaceChildren();
}

/** Where a server `loc` points in the form: a data-path, most specific first. */
export function pathsFor(loc, context) {
  const parts = loc.filter((part) => part !== "body");
  const [head, ...rest] = parts;
  if (context.kept?.has(`${head}.${rest[0]}`)) return []; // a part the form keeps without showing it
  if (head === "techniques") {
    const index = rest.findIndex((part) => context.techniques.includes(part));
    const name = index >= 0 ? rest[index] : context.techniqueNames[rest[0]];
    const field = index >= 0 ? rest[index + 1] : undefined;
    return [field !== undefined && name ? `technique.${name}.${field}` : null, name ? `technique.${name}` : null, "techniques"];
  }
  if (head === "accelerators") {
    const fields = rest.filter((part) => typeof part === "string" && context.acceleratorFields.includes(part));
    const nested = rest.slice(rest.indexOf(fields[0]));
    return [fields.length ? `accelerator.${nested.join(".")}` : null, fields.length ? `accelerator.${fields[0]}` : null, "accelerators"];
  }
  if (head === "sweep" && rest[0] === "parameters" && rest[1] !== undefined) {
    return [`sweep-row:${rest[1]}`, "sweep"];
  }
  const candidates = [];
  for (let n = parts.length; n > 0; n -= 1) candidates.push(parts.slice(0, n).join("."));
  return candidates;
}

function target(form, path) {
  if (path.startsWith("sweep-row:")) {
    const wanted = path.slice("sweep-row:".length);
    return [...form.querySelectorAll("[data-sweep-row]")].find((row) => row.querySelector("[name=sweep-path]").value.trim() === wanted) || null;
  }
  return form.querySelector(`[data-path="${CSS.escape(path)}"]`);
}

function errorSlot(node) {
  if (node.matches(".field, [data-sweep-row]")) return node.querySelector(".error");
  let slot = node.querySelector(":scope > .error");
  if (!slot) {
    slot = el("div", { class: "error", role: "alert" });
    const legend = node.querySelector(":scope > legend");
    if (legend) legend.after(slot); else node.prepend(slot);
  }
  return slot;
}

/** Show each {loc, msg} next to its field; what has no field goes in the box. */
export function showErrors(form, box, errors, context) {
  const unplaced = [];
  for (const error of errors) {
    const paths = pathsFor(error.loc || [], context).filter(Boolean);
    const node = paths.map((path) => target(form, path)).find(Boolean);
    if (!node) {
      unplaced.push(error);
      continue;
    }
    const slot = errorSlot(node);
    slot.textContent = slot.textContent ? `${slot.textContent}; ${error.msg}` : error.msg;
    for (const control of node.matches(".field") ? node.querySelectorAll("input, select") : []) control.setAttribute("aria-invalid", "true");
  }
  if (unplaced.length) {
    box.replaceChildren(el("ul", {}, unplaced.map((e) => el("li", { text: `${(e.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${e.msg}` }))));
  }
}

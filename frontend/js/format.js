// Number and text formatting shared by tables and charts.

export function fmtNumber(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(2);
  return Number(value.toFixed(digits)).toLocaleString("en-US");
}

/** A time in seconds with a unit that keeps four significant digits readable (s, ms or µs). */
export function fmtSeconds(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const abs = Math.abs(value);
  if (abs >= 1 || abs === 0) return `${Number(value.toPrecision(4)).toLocaleString("en-US")} s`;
  if (abs >= 1e-3) return `${Number((value * 1e3).toPrecision(4))} ms`;
  return `${Number((value * 1e6).toPrecision(4))} µs`;
}

export function fmtPercent(value) {
  return value === null || value === undefined ? "–" : `${(value * 100).toFixed(1)}%`;
}

export function fmtParams(params) {
  return Object.entries(params || {})
    .filter(([key]) => key !== "technique")
    .map(([key, value]) => `${key}=${value}`)
    .join(", ");
}

/** The accelerator as a reader tells it apart: its name, and the values swept on it if any
 * (randomly sampled designs share a name). */
export function acceleratorLabel(run) {
  const swept = Object.entries(run.params || {})
    .filter(([key]) => key.startsWith("accelerator."))
    .map(([key, value]) => `${key.slice("accelerator.".length)}=${value}`);
  return swept.length ? `${run.accelerator_name} (${swept.join(", ")})` : run.accelerator_name;
}

export function runLabel(run) {
  return `#${run.id} ${run.technique} @${acceleratorLabel(run)}`;
}

/** Create an element with attributes and children in one call. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

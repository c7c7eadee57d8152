// Number and text formatting shared by tables and charts.

// Numbers for people, by the rules of backend/numbers.py (the same rules, the same cases:
// tests/test_number_format.py runs both). A unit says how to read a number: "s", "pJ", "bytes",
// "pJ·s", "cycles", "MACs", "words" are scaled (ms/s, µJ/mJ/J, MiB/GiB, k/M/G); "mm²", "×" (a ratio),
// "%" (a fraction), "pt" (a difference of fractions) and "" (plain) are not. A lone value has three
// significant figures (never fewer than its integer digits; a whole plain number stays whole); a mean ± half-width shows the
// half-width to two and the mean to the same decimal place.

const MISSING = "–";
// A half-width this small against its mean is floating-point rounding (seeds that measured the
// same value), not a spread: the number is written alone.
const ROUNDING_NOISE = 1e-9;
const SIGNIFICANT = 3;
const INTERVAL_SIGNIFICANT = 2;
const MEAN_MAX_SIGNIFICANT = 6;
const count = (word) => [[1, word], [1e3, `k ${word}`], [1e6, `M ${word}`], [1e9, `G ${word}`], [1e12, `T ${word}`]];
const SCALES = {
  s: [[1e-9, "ns"], [1e-6, "µs"], [1e-3, "ms"], [1, "s"], [60, "min"], [3600, "h"]],
  pJ: [[1, "pJ"], [1e3, "nJ"], [1e6, "µJ"], [1e9, "mJ"], [1e12, "J"], [1e15, "kJ"]],
  bytes: [[1, "B"], [1024, "KiB"], [1024 ** 2, "MiB"], [1024 ** 3, "GiB"], [1024 ** 4, "TiB"]],
  "pJ·s": [[1, "pJ·s"], [1e3, "nJ·s"], [1e6, "µJ·s"], [1e9, "mJ·s"], [1e12, "J·s"]],
  cycles: count("cycles"),
  MACs: count("MACs"),
  words: count("words"),
};
const BASE_STEP = { s: 3 };
const TIGHT = { "×": "×", "%": "%" };
const HUNDREDFOLD = ["%", "pt"];

const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

/** The decimal exponent of |value| once rounded to `significant` figures (9.996 -> 1). */
function exponent(value, significant) {
  if (value === 0) return 0;
  return Number(Math.abs(value).toExponential(significant - 1).split("e")[1]);
}

function decimalsFor(value, significant) {
  if (value === 0) return 0;
  return Math.max(0, significant - 1 - exponent(value, significant));
}

/** Rounded half away from zero on the exact value (toFixed), commas between thousands. */
function fixed(value, decimals, signed = false) {
  const text = Math.abs(value).toFixed(decimals);
  const [whole, part] = text.split(".");
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (part === undefined ? "" : `.${part}`);
  if (Number(text) === 0) return grouped;
  if (value < 0) return `-${grouped}`;
  return signed ? `+${grouped}` : grouped;
}

function scientific(value, significant) {
  return `${value < 0 ? "-" : ""}${Math.abs(value).toExponential(significant - 1).replace("e+", "e")}`;
}

function step(unit, magnitude) {
  const steps = SCALES[unit];
  if (magnitude === 0) return steps[BASE_STEP[unit] ?? 0];
  let chosen = steps[0];
  for (const candidate of steps) if (magnitude >= candidate[0]) chosen = candidate;
  return chosen;
}

function withUnit(number, unit) {
  if (!unit) return number;
  return unit in TIGHT ? `${number}${TIGHT[unit]}` : `${number} ${unit}`;
}

/** One number with its unit, to three significant figures: "171 µJ", "0.998×", "97.3%". */
export function formatValue(value, unit = "", signed = false) {
  if (!isNumber(value)) return MISSING;
  const number = HUNDREDFOLD.includes(unit) ? value * 100 : value;
  signed = signed || unit === "pt";
  if (unit in SCALES) {
    const steps = SCALES[unit];
    let [factor, name] = step(unit, Math.abs(number));
    let scaled = number / factor;
    let decimals = decimalsFor(scaled, SIGNIFICANT);
    const following = steps.findIndex(([f]) => f === factor) + 1;
    // 999.96 ms rounds to 1,000 ms: written as the next step, 1.00 s
    if (following < steps.length && Math.abs(Number(Math.abs(scaled).toFixed(decimals))) * factor >= steps[following][0]) {
      [factor, name] = steps[following];
      scaled = number / factor;
      decimals = decimalsFor(scaled, SIGNIFICANT);
    }
    return withUnit(fixed(scaled, decimals, signed), name);
  }
  if (number !== 0 && !unit && (Math.abs(number) < 1e-3 || Math.abs(number) >= 1e15)) return scientific(number, SIGNIFICANT);
  const whole = !unit && Number.isInteger(number);
  return withUnit(fixed(number, whole ? 0 : decimalsFor(number, SIGNIFICANT), signed), unit);
}

/** A mean ± half-width, the mean to the half-width's precision, in one unit: "171.0 ± 5.5 µJ". */
export function formatEstimate(mean, half, unit = "", signed = false) {
  if (!isNumber(mean)) return MISSING;
  if (!isNumber(half) || Math.abs(half) <= ROUNDING_NOISE * Math.abs(mean)) return formatValue(mean, unit, signed);
  const hundredfold = HUNDREDFOLD.includes(unit) ? 100 : 1;
  let centre = mean * hundredfold;
  let spread = Math.abs(half) * hundredfold;
  signed = signed || unit === "pt";
  let name = unit;
  const larger = Math.max(Math.abs(centre), spread);
  if (unit in SCALES) {
    let factor;
    [factor, name] = step(unit, larger);
    centre /= factor;
    spread /= factor;
  } else if (!unit && (larger < 1e-3 || larger >= 1e15)) {
    return `${scientific(centre, SIGNIFICANT)} ± ${scientific(spread, INTERVAL_SIGNIFICANT)}`;
  }
  let decimals = decimalsFor(spread, INTERVAL_SIGNIFICANT);
  if (centre !== 0) decimals = Math.min(decimals, Math.max(0, MEAN_MAX_SIGNIFICANT - 1 - Number(Math.abs(centre).toExponential().split("e")[1])));
  let halfText = fixed(spread, decimals);
  if (Number(spread.toFixed(decimals)) === 0) { // far below the mean's sixth figure
    halfText = !unit && spread < 1e-3 ? scientific(spread, INTERVAL_SIGNIFICANT) : fixed(spread, decimalsFor(spread, INTERVAL_SIGNIFICANT));
  }
  return withUnit(`${fixed(centre, decimals, signed)} ± ${halfText}`, name);
}

/** A moment in the reader's time zone, written the same in every locale and sortable as text:
 * "2026-12-04 22:41:07". */
export function formatWhen(iso) {
  const at = iso ? new Date(iso) : null;
  if (!at || Number.isNaN(at.getTime())) return MISSING;
  const two = (n) => String(n).padStart(2, "0");
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

export const fmtNumber = (value) => formatValue(value);
export const fmtSeconds = (value) => formatValue(value, "s");
export const fmtPercent = (value) => formatValue(value, "%");

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

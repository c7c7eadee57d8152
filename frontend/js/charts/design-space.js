// The design-space chart of a search: every kept design as time against area, energy as colour,
// one trace per technique (WebGL `scattergl`, or SVG `scatter` where the browser has no WebGL);
// per technique its front (the designs on the search's Pareto front, open markers) and the line
// of its fastest design within every area budget (the time-area front of the points shown).
//
// Axes and colour are logarithmic when their values span more than RATIO_FOR_LOG, and their tick
// labels are the project's number formatter's; the axes' ticks span the points shown. The colour scale's ends are the search's energy
// range over every point, so a colour keeps its meaning while bounds hide points.

import { FIGURE_UNIT, figureText } from "../design-text.js";
import { baseLayout, techniqueColor } from "./common.js";

const RATIO_FOR_LOG = 20;
const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon"];
const NICE = [1, 2, 5];
const FINE = [1, 1.5, 2, 3, 4, 5, 7];
const MAX_TICKS = 9;

/** Whether this browser draws WebGL (Plotly's scattergl needs it). */
export function hasWebGL() {
  try {
    return Boolean(document.createElement("canvas").getContext("webgl"));
  } catch {
    return false;
  }
}

const isLog = ([lo, hi]) => lo > 0 && hi / lo > RATIO_FOR_LOG;

/** Round values between lo and hi (1, 2, 5 per decade on a log scale, finer within less than
 * two decades; even steps on a linear scale or within less than a decade). */
function tickValues(lo, hi, log) {
  if (!(hi > lo)) return [lo];
  if (log && hi / lo >= 10) {
    const steps = Math.log10(hi / lo) < 2 ? FINE : NICE;
    const values = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e += 1) {
      for (const m of steps) values.push(Number((m * 10 ** e).toPrecision(12)));
    }
    const inside = values.filter((v) => v >= lo && v <= hi);
    if (inside.length <= MAX_TICKS) return inside;
    const nice = inside.filter((v) => NICE.includes(Number(v.toExponential().split("e")[0])));
    return nice.length <= MAX_TICKS ? nice : inside.filter((v) => String(v).startsWith("1"));
  }
  const raw = (hi - lo) / 5;
  const decade = 10 ** Math.floor(Math.log10(raw));
  const step = NICE.map((m) => m * decade).find((s) => s >= raw) ?? 10 * decade;
  const values = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) values.push(Number(v.toPrecision(12)));
  return values;
}

/** Ticks of figure `key` over `span` on a log or linear scale, labels formatted. */
function ticks(key, span, log) {
  const values = tickValues(span[0], span[1], log);
  return { values, text: values.map((v) => figureText(key, v)) };
}

/** An axis of figure `key`: its scale from the search's whole range (so it stays as bounds
 * hide points), its ticks over the points shown. */
function axis(key, range, shown, title) {
  const log = isLog(range);
  const { values, text } = ticks(key, shown, log);
  return { type: log ? "log" : "linear", tickvals: values, ticktext: text, title: { text: title }, zeroline: false };
}

function extent(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

const take = (column, positions) => positions.map((p) => column[p]);

/** A ring around the opened design's point of each technique where it is shown (not
 * hoverable). */
function openedTrace(sample, views, opened, type) {
  const x = [];
  const y = [];
  for (const [label, series] of Object.entries(sample.techniques)) {
    const p = series.row.findIndex((row) => sample.designs.index[row] === opened);
    if (p >= 0 && views[label].shown.includes(p)) {
      x.push(series.area_mm2[p]);
      y.push(series.time_s[p]);
    }
  }
  return {
    type, mode: "markers", name: `design #${opened} (open)`, x, y, hoverinfo: "skip",
    marker: { symbol: "circle-open", size: 18, color: "#111", line: { width: 2.5, color: "#111" } },
  };
}

/**
 * The figure: `views` has, per technique label, `shown` (positions meeting the bounds),
 * `front` (of those, the search's front) and `line` (their time-area front); `hover` the
 * hover text of every position; `opened` the design opened, if any. Each trace's customdata is
 * the design number of each point.
 */
export function designSpaceFigure(sample, views, hover, { webgl, opened = null }) {
  const type = webgl ? "scattergl" : "scatter";
  const energyLog = isLog(sample.ranges.energy_j);
  const energy = { log: energyLog, ...ticks("energy_j", sample.ranges.energy_j, energyLog) };
  const colour = (values) => (energy.log ? values.map(Math.log10) : values);
  const colourTicks = energy.log ? energy.values.map(Math.log10) : energy.values;
  const [emin, emax] = colour(sample.ranges.energy_j);
  const data = [];
  Object.keys(sample.techniques).forEach((label, t) => {
    const series = sample.techniques[label];
    const view = views[label];
    const index = (positions) => positions.map((p) => sample.designs.index[series.row[p]]);
    const points = (positions) => ({
      x: take(series.area_mm2, positions),
      y: take(series.time_s, positions),
      customdata: index(positions),
      text: take(hover[label], positions),
      hovertemplate: "%{text}<extra></extra>",
      legendgroup: label,
      meta: { label },
    });
    const symbol = SYMBOLS[t % SYMBOLS.length];
    const techniqueColour = techniqueColor(label);
    data.push({
      type, mode: "markers", name: `${label}: designs`, ...points(view.shown),
      marker: {
        symbol, size: 5, opacity: 0.75, color: colour(take(series.energy_j, view.shown)),
        colorscale: "Viridis", cmin: emin, cmax: emax, showscale: t === 0,
        colorbar: { title: { text: `energy (${FIGURE_UNIT.energy_j})` }, tickvals: colourTicks, ticktext: energy.text, len: 0.9 },
      },
    });
    data.push({
      type, mode: "markers", name: `${label}: front`, ...points(view.front), meta: { label, front: true },
      marker: { symbol: `${symbol}-open`, size: 8, color: techniqueColour, line: { width: 1.5, color: techniqueColour } },
    });
    data.push({
      type, mode: "lines", name: `${label}: fastest within area`, ...points(view.line), meta: { label, line: true },
      line: { shape: "hv", color: techniqueColour, width: 3 },
    });
  });
  if (opened !== null) data.push(openedTrace(sample, views, opened, type));
  const shown = (key) => {
    const values = Object.keys(sample.techniques).flatMap((label) => take(sample.techniques[label][key], views[label].shown));
    return values.length ? extent(values) : sample.ranges[key];
  };
  const layout = baseLayout({
    margin: { l: 80, r: 20, t: 20, b: 60 },
    hovermode: "closest",
    xaxis: axis("area_mm2", sample.ranges.area_mm2, shown("area_mm2"), "area (mm², 45 nm)"),
    yaxis: axis("time_s", sample.ranges.time_s, shown("time_s"), "time of the whole training"),
    legend: { orientation: "h", y: -0.16, groupclick: "toggleitem" },
    uirevision: "design-space", // zoom and legend choices survive redrawing with other bounds
  });
  return { data, layout };
}

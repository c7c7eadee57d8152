// A design search's page: its status and progress (read again every few seconds while it runs,
// with a cancel button for those who may change it), the designs it kept as time against area
// per technique, bounds that filter them here in the browser, the fastest design per technique
// within the bounds (the answer to "within this area, which design and technique train
// fastest, and at what energy?"), and one design opened: its fields and figures, made into runs
// or saved as the user's accelerator.
//
// The bounds are in the address (?area_mm2=10&energy_j=2), the opened design in its hash
// (#design-123), so a view is a link.

import { API, describe, getJson, postJson } from "../api.js";
import { designSpaceFigure, hasWebGL } from "../charts/design-space.js";
import { emptyFigure, techniqueColor } from "../charts/common.js";
import { confirmButton } from "../confirm.js";
import { BOUNDS, designIndex, fastest, timeAreaFront, withinBounds } from "../design-bounds.js";
import { FIGURE_LABEL, FIGURE_UNIT, fieldText, figureLine, figureText } from "../design-text.js";
import { el, formatValue } from "../format.js";
import { showPageError } from "../page-errors.js";
import { progressBar } from "../progress.js";
import { fieldUnits, loadSchemas } from "../schema.js";
import { loadTechniques } from "../techniques.js";

const searchId = Number(location.pathname.split("/").pop());
const $ = (id) => document.getElementById(id);
const OPEN = new Set(["waiting", "running"]);
const POLL_MS = 2000;
const RELOAD_MS = 6000; // while running, the designs are read again at most this often
const SLIDER_STEPS = 1000;
const RATIO_FOR_LOG = 20;
const FIGURES = ["time_s", "energy_j", "area_mm2"];
const BASELINE = "baseline";
const chart = $("design-chart");
const webgl = hasWebGL();

const state = {
  search: null,
  sample: null,
  frontIndices: {}, // label -> Set of design numbers on its front
  positionOf: {}, // label -> Map design number -> position in its columns
  rowOf: new Map(), // design number -> row in sample.designs
  hover: {}, // label -> hover text per position
  limits: Object.fromEntries(BOUNDS.map((bound) => [bound, null])),
  views: {},
  chunksLoaded: -1,
  loadedAt: 0,
  opened: null, // {index, label}
  units: {}, // accelerator field path -> its declared unit
};

const count = (n) => formatValue(n);

// ---- summary, progress and cancel

function facts(container, rows) {
  container.replaceChildren(...rows.flatMap(([term, value]) => [el("dt", { text: term }), el("dd", {}, value)]));
}

function constraintsText(constraints) {
  const parts = Object.entries(constraints || {}).filter(([, v]) => v !== null && v !== undefined)
    .map(([key, value]) => {
      const bound = key.replace(/_max$/, "");
      return `${FIGURE_LABEL[bound] ?? bound} ≤ ${figureText(bound, value)}`;
    });
  return parts.length ? parts.join(", ") : "none";
}

function progressCell(search) {
  const p = search.progress;
  if (!p.chunks_total) return search.status === "waiting" ? "starts when the experiment's trainings are done" : "–";
  const words = `${count(p.chunks_done)} of ${count(p.chunks_total)} chunks, ${count(p.designs_evaluated)} of ${count(search.designs ?? 0)} designs evaluated`;
  if (!OPEN.has(search.status)) return words;
  return el("span", { id: "search-progress" }, progressBar({ fraction: p.fraction }, `search ${search.id} progress`), " ", words);
}

function techniqueCounts(techniques) {
  const entries = Object.entries(techniques);
  if (!entries.length) return "none evaluated yet";
  return el("ul", { class: "plain" }, entries.map(([label, c]) => el("li", {},
    `${label}: ${count(c.front)} on the front of ${count(c.feasible)} feasible of ${count(c.evaluated)} evaluated; ${count(c.sample)} in the sample`)));
}

function renderSummary(search) {
  document.title = `Design search #${search.id} · Orrery`;
  $("title").textContent = `Design search #${search.id} of experiment #${search.experiment_id}`;
  const status = el("span", {}, el("span", { class: `badge ${search.status}`, text: search.status }));
  if (search.status === "waiting") status.append(" ", el("span", { class: "muted", text: "for the experiment's trainings" }));
  if (search.error) status.append(" ", el("span", { class: "failure-reason", text: search.error }));
  const spec = search.spec;
  facts($("summary"), [
    ["Status", status],
    ["Progress", progressCell(search)],
    ["Experiment", el("a", { href: `/experiments/${search.experiment_id}`, text: `experiment #${search.experiment_id}` })],
    ["Designs", `${search.designs === null ? "counted when it starts" : count(search.designs)} (${spec.mode} around ${typeof spec.base === "string" ? spec.base : spec.base.name})`],
    ["Searched fields", search.fields.join(", ")],
    ["Objectives", `${search.objectives.join(", ")} (each minimised)`],
    ["Search's constraints", constraintsText(spec.constraints)],
    ["Per technique", techniqueCounts(search.techniques)],
  ]);
  const actions = $("search-actions");
  actions.replaceChildren();
  if (search.can_edit && OPEN.has(search.status)) {
    actions.append(confirmButton({
      label: "Cancel search",
      question: `Cancel design search #${search.id}? Chunks not yet evaluated are dropped; what is merged stays.`,
      confirmLabel: "Yes, cancel",
      action: async () => {
        try {
          state.search = await postJson(`${API}/searches/${search.id}/cancel`);
          renderSummary(state.search);
        } catch (error) {
          $("page-errors").textContent = `Not cancelled: ${describe(error)}`;
        }
      },
    }));
  }
}

// ---- the designs

function indexDesigns(sample, fronts) {
  state.sample = sample;
  state.rowOf = new Map(sample.designs.index.map((index, row) => [index, row]));
  const fields = Object.entries(sample.designs.fields);
  const rowText = sample.designs.index.map((_, row) => [
    ...fields.map(([path, values]) => `${path}: ${fieldText(values[row], state.units[path])}`),
    figureLine("sram_kib", sample.designs.sram_kib[row]),
  ].join("<br>"));
  for (const [label, series] of Object.entries(sample.techniques)) {
    state.positionOf[label] = new Map(series.row.map((row, p) => [sample.designs.index[row], p]));
    state.frontIndices[label] = new Set((fronts.fronts[label] || []).map((point) => point.index));
    state.hover[label] = series.row.map((row, p) => [
      `<b>design #${sample.designs.index[row]}</b> · ${label}`,
      ...FIGURES.map((key) => figureLine(key, series[key][p])),
      rowText[row],
    ].join("<br>"));
  }
}

async function loadDesigns() {
  const [sample, fronts, schemas] = await Promise.all([
    getJson(`${API}/searches/${searchId}/sample`),
    getJson(`${API}/searches/${searchId}/fronts`),
    loadSchemas(),
  ]);
  state.units = fieldUnits(schemas, "AcceleratorConfig");
  indexDesigns(sample, fronts);
  state.loadedAt = Date.now();
  renderBounds();
  await draw();
}

const labels = () => Object.keys(state.sample.techniques);
const pointCount = () => labels().reduce((n, label) => n + state.sample.techniques[label].row.length, 0);

function computeViews() {
  const { sample, limits } = state;
  state.views = {};
  for (const label of labels()) {
    const shown = withinBounds(sample, label, limits);
    const kept = new Set(shown);
    const front = [...state.frontIndices[label]].map((i) => state.positionOf[label].get(i)).filter((p) => kept.has(p));
    state.views[label] = { shown, front, line: timeAreaFront(sample, label, shown), best: fastest(sample, label, shown) };
  }
}

let drawing = null;
let clickBound = false;

async function plot(figure) {
  await Plotly.react(chart, figure.data, figure.layout, { responsive: true, displaylogo: false });
  if (!clickBound) {
    clickBound = true;
    chart.on("plotly_click", (event) => {
      const point = event.points?.[0];
      if (point && point.data.meta) openDesign(point.customdata, point.data.meta.label);
    });
  }
}

async function render() {
  $("bounds-panel").hidden = !state.sample || !pointCount();
  if (!state.sample || !pointCount()) {
    const open = state.search && OPEN.has(state.search.status);
    await plot(emptyFigure(open ? "no design evaluated yet" : "no design kept"));
    return;
  }
  computeViews();
  await plot(designSpaceFigure(state.sample, state.views, state.hover, { webgl, opened: state.opened?.index ?? null }));
  renderCount();
  renderAnswer();
  chart.dataset.drawn = String(Number(chart.dataset.drawn || 0) + 1);
}

/** Draw once on the next frame however often asked before it (a slider dragged). */
function draw() {
  drawing ??= new Promise((resolve) => requestAnimationFrame(() => {
    drawing = null;
    render().then(resolve);
  }));
  return drawing;
}

// ---- bounds

const boundLabel = (bound) => `${FIGURE_LABEL[bound][0].toUpperCase()}${FIGURE_LABEL[bound].slice(1)} at most (${FIGURE_UNIT[bound]})`;

/** Slider position <-> value over the bound's range, logarithmic for a wide range; the last
 * position is no bound. */
function slider(range) {
  const [lo, hi] = range;
  const log = lo > 0 && hi / lo > RATIO_FOR_LOG;
  return {
    value: (position) => {
      if (position >= SLIDER_STEPS) return null;
      const f = position / SLIDER_STEPS;
      return Number((log ? lo * (hi / lo) ** f : lo + (hi - lo) * f).toPrecision(3));
    },
    position: (value) => {
      if (value === null) return SLIDER_STEPS;
      const f = log ? Math.log(value / lo) / Math.log(hi / lo) : (value - lo) / (hi - lo || 1);
      return Math.round(Math.min(SLIDER_STEPS - 1, Math.max(0, f * SLIDER_STEPS)));
    },
  };
}

function writeAddress() {
  const params = new URLSearchParams();
  for (const bound of BOUNDS) if (state.limits[bound] !== null) params.set(bound, String(state.limits[bound]));
  const text = params.toString();
  history.replaceState(null, "", `${location.pathname}${text ? `?${text}` : ""}${location.hash}`);
}

function readAddress() {
  const params = new URLSearchParams(location.search);
  for (const bound of BOUNDS) {
    const value = Number(params.get(bound));
    if (params.has(bound) && Number.isFinite(value) && value > 0) state.limits[bound] = value;
  }
}

function boundText(bound) {
  const value = state.limits[bound];
  return value === null ? "no bound" : `≤ ${figureText(bound, value)}`;
}

function renderBounds() {
  const form = $("bounds");
  const ranges = state.sample.ranges;
  const present = BOUNDS.filter((bound) => ranges[bound]);
  const key = JSON.stringify(present.map((bound) => [bound, ranges[bound]]));
  if (form.dataset.bounds === key) return; // already built: keep what is being typed
  form.dataset.bounds = key;
  form.replaceChildren(...present.map((bound) => {
    const map = slider(ranges[bound]);
    const range = el("input", {
      type: "range", id: `slider-${bound}`, min: "0", max: String(SLIDER_STEPS), step: "1",
      value: String(map.position(state.limits[bound])), "aria-label": `${boundLabel(bound)}, slider`,
    });
    const number = el("input", {
      type: "number", id: `bound-${bound}`, step: "any", min: "0", placeholder: "none",
      value: state.limits[bound] ?? "",
    });
    const text = el("span", { class: "muted bound-text", id: `bound-text-${bound}`, text: boundText(bound) });
    const update = () => {
      text.textContent = boundText(bound);
      writeAddress();
      draw();
    };
    range.addEventListener("input", () => {
      state.limits[bound] = map.value(Number(range.value));
      number.value = state.limits[bound] ?? "";
      number.removeAttribute("aria-invalid");
      update();
    });
    number.addEventListener("input", () => {
      const value = number.value.trim() === "" ? null : Number(number.value);
      const valid = value === null || (Number.isFinite(value) && value > 0);
      number.setAttribute("aria-invalid", String(!valid));
      if (!valid) return;
      state.limits[bound] = value;
      range.value = String(map.position(value));
      update();
    });
    const [lo, hi] = ranges[bound];
    return el("div", { class: "bound" },
      el("label", { for: `bound-${bound}`, text: boundLabel(bound) }),
      el("div", { class: "row" }, range, number),
      el("div", { class: "hint" }, text, ` (kept: ${figureText(bound, lo)} to ${figureText(bound, hi)})`));
  }),
  el("button", { type: "button", text: "No bounds", onclick: () => {
    for (const bound of BOUNDS) state.limits[bound] = null;
    form.dataset.bounds = "";
    renderBounds();
    writeAddress();
    draw();
  } }));
}

function renderCount() {
  const shown = labels().reduce((n, label) => n + state.views[label].shown.length, 0);
  $("bounds-count").textContent = `${count(shown)} of ${count(pointCount())} points meet the bounds`;
  const evaluated = state.search?.progress.designs_evaluated ?? 0;
  $("chart-note").textContent = [
    `${count(pointCount())} points: per technique its front and a sample of up to ${count(state.search?.spec.sample_size ?? 0)} of the ${count(evaluated)} designs evaluated.`,
    webgl ? "" : "This browser has no WebGL: the designs are drawn as SVG, which is slow with many points.",
  ].join(" ");
}

// ---- the answer: fastest design per technique within the bounds

function boundsWords() {
  const set = BOUNDS.filter((bound) => state.limits[bound] !== null);
  return set.length ? `Within ${set.map((bound) => `${FIGURE_LABEL[bound]} ${boundText(bound)}`).join(", ")}` : "Over every design shown";
}

function designButton(index, label) {
  return el("button", { type: "button", class: "link", text: `#${index}`, "aria-label": `open design ${index} (${label})`,
    onclick: () => openDesign(index, label) });
}

function exactnessNote() {
  const { objectives } = state.search;
  const exact = objectives.includes("time") && objectives.includes("area") && state.limits.sram_kib === null;
  return exact
    ? "Exact over every design evaluated: the fastest design within an area (and energy) bound is on the search's front, which is kept whole."
    : "Among the points shown: the search's front does not hold every answer here (its objectives leave out time or area, or an SRAM bound is set), so a design outside the sample may do better.";
}

function renderAnswer() {
  const { sample, views } = state;
  const rows = labels().map((label) => ({ label, p: views[label].best }))
    .sort((a, b) => (a.p === null) - (b.p === null) || (a.p !== null && sample.techniques[a.label].time_s[a.p] - sample.techniques[b.label].time_s[b.p]));
  const time = (row) => sample.techniques[row.label].time_s[row.p];
  const baseline = rows.find((row) => row.label === BASELINE && row.p !== null);
  const winner = rows[0]?.p !== null ? rows[0] : null;
  const answer = $("answer");
  if (!winner) {
    answer.textContent = `${boundsWords()}: no design.`;
  } else {
    const s = sample.techniques[winner.label];
    answer.replaceChildren(`${boundsWords()}: `, el("strong", { text: winner.label }), " on design ",
      designButton(designIndex(sample, winner.label, winner.p), winner.label),
      ` trains fastest, ${figureText("time_s", s.time_s[winner.p])} at ${figureText("energy_j", s.energy_j[winner.p])} (${figureText("area_mm2", s.area_mm2[winner.p])}).`);
  }
  const headers = ["Technique", "Design", "Time", "Energy", "Area", ...(baseline ? ["vs baseline"] : [])];
  const body = rows.map((row) => {
    if (row.p === null) {
      return el("tr", { dataset: { technique: row.label } }, el("th", { scope: "row", text: row.label }),
        el("td", { colspan: String(headers.length - 1), class: "muted", text: "no design within the bounds" }));
    }
    const s = sample.techniques[row.label];
    return el("tr", { class: row === winner ? "best" : undefined, dataset: { technique: row.label, design: String(designIndex(sample, row.label, row.p)) } },
      el("th", { scope: "row" }, el("span", { class: "swatch", style: `background:${techniqueColor(row.label)}` }), row.label),
      el("td", {}, designButton(designIndex(sample, row.label, row.p), row.label)),
      ...FIGURES.map((key) => el("td", { class: "num", text: figureText(key, s[key][row.p]) })),
      ...(baseline ? [el("td", { class: "num", title: "the baseline's fastest time within the bounds over this one's", text: formatValue(time(baseline) / time(row), "×") })] : []));
  });
  $("fastest").replaceChildren(el("table", { class: "data", id: "fastest-table" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, body)));
  $("answer-note").textContent = exactnessNote();
}

// ---- one design

function onFronts(index) {
  return labels().filter((label) => state.frontIndices[label].has(index));
}

function designFigures(index) {
  const rows = labels().filter((label) => state.positionOf[label].has(index)).map((label) => {
    const p = state.positionOf[label].get(index);
    const s = state.sample.techniques[label];
    return el("tr", { dataset: { technique: label } }, el("th", { scope: "row", text: label }),
      ...FIGURES.map((key) => el("td", { class: "num", text: figureText(key, s[key][p]) })),
      el("td", { text: state.frontIndices[label].has(index) ? "yes" : "no" }));
  });
  return el("table", { class: "data", id: "design-figures" },
    el("thead", {}, el("tr", {}, ["Technique", "Time", "Energy", "Area", "On its front"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows));
}

function designFields(index) {
  const row = state.rowOf.get(index);
  const list = el("dl", { class: "facts", id: "design-fields" });
  for (const [path, values] of Object.entries(state.sample.designs.fields)) {
    list.append(el("dt", { text: path }), el("dd", { text: fieldText(values[row], state.units[path]) }));
  }
  list.append(el("dt", { text: "SRAM (ifmap + filter + ofmap)" }), el("dd", { text: figureText("sram_kib", state.sample.designs.sram_kib[row]) }));
  return list;
}

function runsButton(index, message) {
  return el("button", { type: "button", class: "primary", text: "Make runs of this design", onclick: async (event) => {
    event.target.disabled = true;
    message.textContent = "making runs…";
    try {
      const runs = await postJson(`${API}/searches/${searchId}/designs/${index}/runs`);
      message.replaceChildren(`Made ${count(runs.length)} runs, simulated by the workers on the stored trainings: `,
        ...runs.flatMap((run, i) => [i ? ", " : "", el("a", { href: `/runs/${run.id}`, text: `run #${run.id}` })]),
        " (also in ", el("a", { href: `/experiments/${state.search.experiment_id}`, text: "the experiment's run table" }), ").");
    } catch (error) {
      message.textContent = `No runs made: ${describe(error)}`;
      event.target.disabled = false;
    }
  } });
}

function saveForm(index, message) {
  const name = el("input", { type: "text", id: "accelerator-name", value: `search ${searchId} design ${index}`, maxlength: "64" });
  const form = el("form", { class: "row", "aria-label": "save as my accelerator" },
    el("label", { for: "accelerator-name", text: "Name" }), name,
    el("button", { type: "submit", text: "Save as my accelerator" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const saved = await postJson(`${API}/searches/${searchId}/designs/${index}/accelerator`, { name: name.value });
      message.replaceChildren(`Saved as your accelerator “${saved.name}”: the submit form lists it under your accelerators.`);
    } catch (error) {
      message.textContent = `Not saved: ${describe(error)}`;
    }
  });
  return form;
}

function openDesign(index, label) {
  if (!state.rowOf.has(index)) return;
  state.opened = { index, label };
  history.replaceState(null, "", `${location.pathname}${location.search}#design-${index}`);
  const fronts = onFronts(index);
  $("design-title").textContent = `Design #${index}`;
  const message = el("p", { class: "design-message", role: "status" });
  const actions = el("div", { class: "row actions" });
  if (fronts.length) {
    if (state.search.can_edit) actions.append(runsButton(index, message));
    actions.append(saveForm(index, message));
  }
  $("design-body").replaceChildren(
    el("p", { id: "design-front" }, fronts.length
      ? `On the front of ${fronts.join(", ")}: it can become runs of the experiment (every training, with baselines) or your own accelerator.`
      : "On no technique's front: a design on the front is at least as good in every objective, so only front designs become runs or accelerators."),
    el("p", { class: "muted", text: `Opened from ${label}'s points.` }),
    el("div", { class: "spec-grid" }, el("div", {}, el("h3", { text: "Searched fields" }), designFields(index)),
      el("div", {}, el("h3", { text: "Figures per technique" }), designFigures(index))),
    actions, message);
  $("design").hidden = false;
  $("design").scrollIntoView({ block: "nearest" });
  draw();
}

function openFromHash() {
  const match = /^#design-(\d+)$/.exec(location.hash);
  if (!match || !state.sample) return;
  const index = Number(match[1]);
  const label = labels().find((l) => state.positionOf[l].has(index));
  if (label) openDesign(index, label);
}

// ---- following a running search

async function follow() {
  while (OPEN.has(state.search.status)) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      state.search = await getJson(`${API}/searches/${searchId}`);
      renderSummary(state.search);
      const done = state.search.progress.chunks_done;
      const finished = !OPEN.has(state.search.status);
      if (done !== state.chunksLoaded && (finished || Date.now() - state.loadedAt > RELOAD_MS)) {
        state.chunksLoaded = done;
        await loadDesigns();
      }
    } catch (error) {
      $("page-errors").textContent = `Not refreshed: ${describe(error)}`;
    }
  }
}

async function main() {
  readAddress();
  try {
    await loadTechniques();
    state.search = await getJson(`${API}/searches/${searchId}`);
  } catch (error) {
    showPageError(`Cannot show design search ${searchId}: ${describe(error)}`, error);
    return;
  }
  renderSummary(state.search);
  try {
    state.chunksLoaded = state.search.progress.chunks_done;
    await loadDesigns();
  } catch (error) {
    $("page-errors").textContent = `The designs did not load: ${describe(error)}`;
  }
  openFromHash();
  follow();
}

main();

// One run in full: what it is, what it was compared with, and every figure it produced; while
// it is open, its progress and curves follow the training (read again every few seconds).

import { annotationsEditor } from "../annotations.js";
import { API, del, describe, getJson, postJson, query } from "../api.js";
import { confirmButton } from "../confirm.js";
import curves from "../charts/curves.js";
import { el, fmtNumber, fmtPercent, fmtSeconds, formatValue, formatWhen } from "../format.js";
import { statusCell } from "../run-table.js";
import { fmtDuration, progressText } from "../progress.js";
import { epochFigures, layerMeasures, loadFigures, runMeasures } from "../figures.js";
import { showPageError } from "../page-errors.js";
import { loadTechniques } from "../techniques.js";

const runId = Number(location.pathname.split("/").pop());
const errors = document.getElementById("page-errors");
const OPEN = new Set(["queued", "running"]);
const POLL_MS = 2000;

const link = (href, text) => el("a", { href, text });
const mib = (bytes) => formatValue(bytes, "bytes");
const squareMm = (mm2) => formatValue(mm2, "mm²");
const microjoules = (pj) => formatValue(pj, "pJ");

/** The area by component, one line each, for the Area figure's hover text. */
function areaParts(parts) {
  if (!parts) return undefined;
  return Object.entries(parts).filter(([, um2]) => um2 > 0)
    .map(([name, um2]) => `${name.replaceAll("_", " ")}: ${formatValue(um2 / 1e6, "mm²")}`).join("\n");
}

function facts(container, rows) {
  container.replaceChildren();
  for (const [term, value] of rows) {
    container.append(typeof term === "string" ? el("dt", { text: term }) : el("dt", {}, term), el("dd", {}, value));
  }
}

function baselineText(run) {
  if (run.is_baseline) return `itself: a baseline (${run.baseline_hardware} hardware)`;
  if (run.baseline_run_id === null) return "no baseline";
  const hardware = run.baseline_hardware === "same"
    ? "the same accelerator with only zero-skipping on"
    : "the dense accelerator (every extension off)";
  return el("span", {}, link(`/runs/${run.baseline_run_id}`, `run #${run.baseline_run_id}`), `, on ${hardware}`);
}

/** The speedup, or why there is none yet: a baseline not done is named, linked, with its state. */
function speedupText(run, baseline) {
  if (run.speedup !== null) return formatValue(run.speedup, "×");
  if (run.status !== "done" || !baseline) return "–";
  const name = link(`/runs/${baseline.id}`, `baseline run #${baseline.id}`);
  if (OPEN.has(baseline.status)) {
    const state = baseline.live ? `: ${baseline.status}, ${progressText(baseline.live)}` : `: ${baseline.status}`;
    return el("span", { class: "waiting-baseline" }, "waiting for ", name, state);
  }
  return el("span", { class: "waiting-baseline" }, "none: ", name, ` ${baseline.status}`);
}

/** The accuracy change against the baseline, in points (the server's /runs/compare). */
function deltaText(comparison) {
  const delta = comparison?.accuracy_delta;
  if (delta === null || delta === undefined) return "–";
  return `${formatValue(delta, "pt")} (baseline ${fmtPercent(comparison.baseline_accuracy)})`;
}

/** Created, started and finished times, and how long it took (or has taken so far). */
function timeRows(run) {
  const started = run.started_at ? new Date(run.started_at) : null;
  const end = run.finished_at ? new Date(run.finished_at) : OPEN.has(run.status) ? new Date() : null;
  const took = started && end ? fmtDuration((end - started) / 1000) : "–";
  return [
    ["Created", formatWhen(run.created_at)],
    ["Started", formatWhen(run.started_at)],
    ["Finished", formatWhen(run.finished_at)],
    ["Duration", run.finished_at || !started ? took : `${took} so far`],
  ];
}

function renderSummary(run, { baseline = null, comparison = null } = {}) {
  document.title = `Run #${run.id} · Orrery`;
  document.getElementById("title").textContent = `Run #${run.id}: ${run.technique} on ${run.accelerator_name}`;
  const status = statusCell({ ...run, ...run.live }, { shortReason: false });
  if (run.error) status.append(" ", el("span", { class: "failure-reason", text: run.error }));
  facts(document.getElementById("summary"), [
    ["Status", status],
    ["Attempt", run.attempts.length ? `${run.attempt} (earlier ones below)` : String(run.attempt)],
    ["Experiment", link(`/experiments/${run.experiment_id}`, `experiment #${run.experiment_id}`)],
    ["Compared with", baselineText(run)],
    ["Model, data, seed", `${run.model} on ${run.dataset}, seed ${run.seed}`],
    ...timeRows(run),
    ...figureRows(run, baseline, comparison),
  ]);
}

/** The run's figures: these rows (each with the measures it writes, some best read together),
 * then every other measure the server declares for a run, a row each, in the server's order. */
function figureRows(run, baseline, comparison) {
  const written = [
    [["accuracy"], "Test accuracy", fmtPercent(run.accuracy)],
    [[], "Δ accuracy", deltaText(comparison)],
    [["speedup"], "Speedup", speedupText(run, baseline)],
    [["energy_ratio"], "Energy ratio", formatValue(run.energy_ratio, "×")],
    [["total_cycles", "compute_cycles", "stall_cycles"], "Cycles", `${formatValue(run.total_cycles, "cycles")} (${formatValue(run.compute_cycles, "cycles")} array and exposed extension + ${formatValue(run.stall_cycles, "cycles")} stall)`],
    [["seconds", "seconds_per_step"], "Time", `${fmtSeconds(run.seconds)} for the training, ${fmtSeconds(run.seconds_per_step)} a step (at ${fmtNumber(run.accelerator_config?.clock_mhz ?? null)} MHz)`],
    [["energy_pj"], "Energy", microjoules(run.energy_pj)],
    [["area_mm2"], "Area", el("span", { title: areaParts(run.summary?.area_um2) }, `${squareMm(run.area_mm2)} (45 nm, its extensions included)`)],
    [["macs_actual", "macs_algorithmic"], "MACs actual / algorithmic", `${formatValue(run.macs_actual, "MACs")} / ${formatValue(run.macs_algorithmic, "MACs")}`],
    [["macs_skipped", "macs_overhead"], "MACs skipped / overhead", `${formatValue(run.macs_skipped, "MACs")} / ${formatValue(run.macs_overhead, "MACs")}`],
    [["dram_bytes"], "DRAM traffic", mib(run.dram_bytes)],
  ];
  const shown = new Set(written.flatMap(([keys]) => keys));
  const others = runMeasures().filter((m) => !shown.has(m.key))
    .map((m) => [el("span", { title: m.description, text: m.label }), formatValue(run[m.key] ?? null, m.display_unit)]);
  return [...written.map(([, term, value]) => [term, value]), ...others];
}

/** The run's earlier attempts, each ended (failed or cancelled) and then retried. */
function renderAttempts(run) {
  const box = document.getElementById("attempts");
  if (!run.attempts.length) {
    box.append(el("p", { class: "muted", text: "This is the run's first attempt." }));
    return;
  }
  const headers = ["Attempt", "Ended", "Reason", "Started", "Finished", "Worker", "Retried"];
  box.append(el("table", { class: "data", id: "attempt-table" },
    el("thead", {}, el("tr", {}, headers.map((label) => el("th", { scope: "col", text: label })))),
    el("tbody", {}, [...run.attempts].reverse().map((a) => el("tr", {},
      el("td", { class: "num", text: String(a.attempt) }),
      el("td", { text: a.status }),
      el("td", { class: "failure-reason", text: a.error || "–" }),
      el("td", { text: formatWhen(a.started_at) }),
      el("td", { text: formatWhen(a.finished_at) }),
      el("td", { text: a.worker || "unknown" }),
      el("td", { text: formatWhen(a.retried_at) }))))));
}

function retryButton(run) {
  return confirmButton({
    label: "Retry run",
    question: `Run #${run.id} again as attempt ${run.attempt + 1} (this attempt is kept)?`,
    confirmLabel: "Yes, retry",
    danger: false,
    action: async () => {
      try {
        await postJson(`${API}/runs/${run.id}/retry`);
        location.reload();
      } catch (error) {
        errors.textContent = `Not retried: ${describe(error)}`;
      }
    },
  });
}

function keyValueTable(caption, data, prefix = "") {
  const rows = [];
  const walk = (value, path) => {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const [key, inner] of Object.entries(value)) walk(inner, path ? `${path}.${key}` : key);
    } else {
      rows.push([path, Array.isArray(value) ? JSON.stringify(value) : String(value)]);
    }
  };
  walk(data, prefix);
  return el("table", { class: "data compact" },
    el("caption", { text: caption }),
    el("tbody", {}, rows.map(([key, value]) => el("tr", {}, el("th", { scope: "row", text: key }), el("td", { text: value })))));
}

function renderSpec(run) {
  const spec = document.getElementById("spec");
  spec.append(keyValueTable("Training", run.training_config));
  for (const params of run.technique_params) {
    const { name, ...knobs } = params;
    spec.append(keyValueTable(`Technique: ${name}`, Object.keys(knobs).length ? knobs : { "(no settings)": "" }));
  }
  spec.append(keyValueTable(`Accelerator: ${run.accelerator_name}`, run.accelerator_config));
  if (run.training_environment) spec.append(keyValueTable("Trained with", run.training_environment));
}

/** The layer table's columns: every layer-pass measure the server declares, then the parts of
 * the compute cycles (total = array + exposed extension + stall; extension work the array's
 * time hides is free). */
function layerColumns() {
  return [
    ["Layer", (l) => l.layer],
    ["Pass", (l) => l.training_pass],
    ["Role", (l) => l.role],
    ...layerMeasures().map((m) => [m.label, (l) => formatValue(l[m.key] ?? null, m.display_unit), true]),
    ["Array cycles", (l) => formatValue(l.details.array_cycles ?? null, "cycles"), true],
    ["Exposed extension", (l) => formatValue(l.details.exposed_extension_cycles ?? null, "cycles"), true],
  ];
}

function renderLayers(run) {
  const box = document.getElementById("layers");
  box.replaceChildren();
  if (!run.layers.length) {
    box.append(el("p", { class: "muted", text: run.status === "done" ? "no layer results stored" : `no results yet (${run.status})` }));
    return;
  }
  const columns = layerColumns();
  box.append(el("table", { class: "data", id: "layer-table" },
    el("thead", {}, el("tr", {}, columns.map(([label]) => el("th", { scope: "col", text: label })))),
    el("tbody", {}, run.layers.map((layer) => el("tr", {},
      columns.map(([, value, num]) => el("td", { class: num ? "num" : undefined, text: value(layer) })))))));
}

/** A declared figure's label; any other per-layer key as written, underscores as spaces. */
function columnLabel(key) {
  return epochFigures().find((figure) => figure.key === key)?.label ?? key.replaceAll("_", " ");
}

/** When and why a layer's reuse was switched off: MERCURY's adaptive rule records, in the
 * epoch at whose end it decided, the threshold the layer's hit rate fell below. */
function switchOffNotes(run) {
  const notes = [];
  for (const epoch of run.epochs) {
    for (const [layer, figures] of Object.entries(epoch.per_layer || {})) {
      if (!Number.isFinite(figures.reuse_off_below)) continue;
      notes.push(el("li", { "data-layer": layer, "data-epoch": String(epoch.epoch) },
        `MERCURY switched reuse off in layer ${layer} after epoch ${epoch.epoch}: its hit rate `
        + `${fmtPercent(figures.hit_rate ?? null)} fell below min_hit_rate `
        + `${fmtPercent(figures.reuse_off_below)}, too few hits to pay for its signatures and MCACHE `
        + "lookups. From then on it computes every row, and the run's hit rate and MAC-weighted reuse "
        + "count it as reusing nothing."));
    }
  }
  return notes.length ? el("ul", { id: "reuse-switched-off" }, notes) : null;
}

/** The per-layer figures the training recorded each epoch (hit rates, densities, cosines). */
function renderLayerEpochs(run) {
  const box = document.getElementById("layer-epochs");
  box.replaceChildren();
  const notes = switchOffNotes(run);
  if (notes) box.append(notes);
  const keys = new Set();
  for (const epoch of run.epochs) for (const figures of Object.values(epoch.per_layer || {})) for (const key of Object.keys(figures)) keys.add(key);
  if (!keys.size) {
    box.append(el("p", { class: "muted", text: "no per-layer figures recorded" }));
    return;
  }
  const columns = [...keys].sort();
  const rows = [];
  for (const epoch of run.epochs) {
    for (const [layer, figures] of Object.entries(epoch.per_layer || {})) {
      rows.push(el("tr", {}, el("td", { class: "num", text: String(epoch.epoch) }), el("td", { text: layer }),
        columns.map((key) => el("td", { class: "num", text: fmtNumber(figures[key] ?? null) }))));
    }
  }
  box.append(el("table", { class: "data", id: "layer-epoch-table" },
    el("thead", {}, el("tr", {}, ["Epoch", "Layer", ...columns.map(columnLabel)].map((label) => el("th", { scope: "col", text: label })))),
    el("tbody", {}, rows)));
}

/** What the summary reads beside the run: its comparison with its baseline, and the baseline
 * itself while the run's speedup waits for it. */
async function related(run) {
  const [comparison] = run.accuracy === null ? [null] : await getJson(`${API}/runs/compare${query({ ids: [run.id] })}`);
  const waiting = run.speedup === null && run.status === "done" && !run.is_baseline && run.baseline_run_id !== null;
  const baseline = waiting ? await getJson(`${API}/runs/${run.baseline_run_id}`) : null;
  return { comparison, baseline };
}

/** The parts that change while a run is open: summary, layers, curves. */
async function renderLive(run, parts) {
  renderSummary(run, parts);
  renderLayers(run);
  renderLayerEpochs(run);
  const figure = curves.build([run]);
  await Plotly.react("curves", figure.data, figure.layout, { responsive: true, displaylogo: false });
  document.getElementById("curves").dataset.epochs = String(run.epochs.length);
}

/** Read the run again every few seconds while it is open or its speedup waits for a baseline. */
function follow(run, baseline) {
  if (!OPEN.has(run.status) && !(baseline && OPEN.has(baseline.status))) return;
  setTimeout(async () => {
    try {
      const next = await getJson(`${API}/runs/${runId}`);
      if (next.attempt !== run.attempt || next.attempts.length !== run.attempts.length) {
        location.reload();
        return;
      }
      const parts = await related(next);
      await renderLive(next, parts);
      follow(next, parts.baseline);
    } catch (error) {
      errors.textContent = `Stopped following run ${runId}: ${describe(error)}`;
    }
  }, POLL_MS);
}

async function main() {
  try {
    const run = await getJson(`${API}/runs/${runId}`);
    renderSummary(run);
    renderAttempts(run);
    const actions = document.getElementById("run-actions");
    if (run.status === "failed" || run.status === "cancelled") actions.append(retryButton(run), " ");
    actions.append(confirmButton({
      label: "Delete run", question: `Delete run #${run.id} and its results for good?`, confirmLabel: "Yes, delete",
      action: async () => {
        try {
          await del(`${API}/runs/${run.id}`);
          location.href = `/experiments/${run.experiment_id}`;
        } catch (error) {
          errors.textContent = `Not deleted: ${describe(error)}`;
        }
      },
    }));
    annotationsEditor(document.getElementById("annotations"), { path: `${API}/runs/${run.id}`, tags: run.tags, notes: run.notes, what: "run" });
    renderSpec(run);
    // Only the colours need the techniques, and only the labels and curves the figures.
    await Promise.all([loadTechniques().catch(() => null), loadFigures().catch(() => null)]);
    const parts = await related(run);
    await renderLive(run, parts);
    follow(run, parts.baseline);
  } catch (error) {
    showPageError(`Cannot show run ${runId}: ${describe(error)}`, error);
  }
}

main();

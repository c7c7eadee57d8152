// The submit page: a form generated from the API's schema, a live run-count preview, server
// errors beside their fields, and the spec as YAML/JSON for the CLI.

import { API, ApiError, describe, getJson, postJson } from "../api.js";
import { el } from "../format.js";
import { loadSchemas } from "../schema.js";
import { fill, objectFields, readAll, readChanged } from "../schema-fields.js";
import { clearErrors, showErrors } from "../spec-errors.js";
import { specText } from "../spec-text.js";
import { readSweep, sweepRow } from "../sweep-rows.js";
import { loadTechniques } from "../techniques.js";

const $ = (id) => document.getElementById(id);
const form = $("spec-form");
const errorBox = $("form-errors");
let schemas = null;
let presets = {};
let saved = []; // the user's own accelerators (GET /accelerators), full configs
let offered = []; // the server's techniques but the baseline every technique runs against
let context = { techniques: [], techniqueNames: [], acceleratorFields: [] };

function textField(path, label, attrs = {}, hint = "") {
  const id = `f-${path}`;
  return el("div", { class: "field", dataset: { path } },
    el("label", { for: id, text: label }),
    attrs.rows ? el("textarea", { id, name: path, ...attrs }) : el("input", { id, name: path, ...attrs }),
    hint ? el("span", { class: "hint", text: hint }) : null,
    el("span", { class: "error", "aria-live": "polite" }));
}

function experimentSection() {
  const props = schemas.ExperimentSpec.properties;
  return el("fieldset", { dataset: { path: "experiment" } }, el("legend", { text: "Experiment" }),
    textField("name", "Experiment name", { type: "text", required: true, maxlength: "200", value: "my experiment" }, props.name.description),
    textField("seeds", "Seeds", { type: "text", value: "0", pattern: "\\s*\\d+(\\s*,\\s*\\d+)*\\s*" }, `${props.seeds.description} · comma-separated · default: 0`),
    textField("team_id", "Team id", { type: "number", min: "1", placeholder: "none" }, props.team_id.description),
    el("div", { class: "field", dataset: { path: "baseline_hardware" } },
      el("label", { for: "f-baseline_hardware", text: "Baseline hardware" }),
      el("select", { id: "f-baseline_hardware", name: "baseline_hardware" },
        el("option", { value: "dense", text: "dense (every extension off)" }),
        el("option", { value: "same", text: "same (own accelerator, zero-skipping on)" })),
      el("span", { class: "hint", text: props.baseline_hardware.description }),
      el("span", { class: "error", "aria-live": "polite" })),
    textField("description", "Description", { rows: "2", maxlength: "5000" }, props.description.description));
}

function trainingSection() {
  return el("fieldset", { dataset: { path: "training" } }, el("legend", { text: "Training" }),
    el("p", { class: "hint", text: schemas.TrainingConfig.description }),
    objectFields(schemas, "TrainingConfig", "training"));
}

function techniquesSection() {
  const blocks = offered.map(({ name, label, params_schema: schemaName }, index) => {
    const box = el("input", { type: "checkbox", id: `use-${name}`, name: "technique", value: name, checked: index === 0 });
    const params = el("fieldset", { dataset: { path: `technique.${name}` } }, el("legend", { text: `${label} knobs` }),
      el("p", { class: "hint", text: schemas[schemaName].description }),
      objectFields(schemas, schemaName, `technique.${name}`, { skip: ["name"] }));
    const show = () => { params.hidden = !box.checked; };
    box.addEventListener("change", show);
    show();
    return el("div", { class: "technique" }, el("div", { class: "field check" }, box, el("label", { for: `use-${name}`, text: label })), params);
  });
  return el("fieldset", { dataset: { path: "techniques" } }, el("legend", { text: "Techniques" }),
    el("p", { class: "hint", text: "Each checked technique runs against a plain baseline; its knobs start at their defaults." }),
    el("div", { class: "error", role: "alert" }),
    blocks,
    el("div", { class: "field check" }, el("input", { type: "checkbox", id: "compose", name: "compose" }),
      el("label", { for: "compose", text: "Also run the checked techniques composed in one run" })));
}

/** A preset's config, or one of the user's saved accelerators ("saved:ID"). */
function startingPoint(value) {
  if (!value.startsWith("saved:")) return presets[value];
  return saved.find((a) => `saved:${a.id}` === value).config;
}

function acceleratorsSection() {
  const presetBoxes = Object.entries(presets).map(([name, p]) => el("div", { class: "field check" },
    el("input", { type: "checkbox", id: `preset-${name}`, name: "preset", value: name, checked: name === "tpu-like" }),
    el("label", { for: `preset-${name}`, text: name }),
    el("span", { class: "hint", text: `${p.rows}×${p.cols} ${p.dataflow}, ${p.clock_mhz} MHz, ${p.dram_bandwidth} words/cycle` })));
  const custom = el("fieldset", { dataset: { path: "accelerator" }, hidden: true }, el("legend", { text: "Custom accelerator" }),
    el("div", { class: "field" }, el("label", { for: "custom-from", text: "Start from preset" }),
      el("select", { id: "custom-from", onchange: (e) => { if (e.target.value) fill(form, "accelerator", startingPoint(e.target.value)); refresh(); } },
        el("option", { value: "", text: "defaults" }), Object.keys(presets).map((n) => el("option", { value: n, text: n })),
        saved.length ? el("optgroup", { label: "your accelerators" }, saved.map((a) => el("option", { value: `saved:${a.id}`, text: a.name }))) : [])),
    objectFields(schemas, "AcceleratorConfig", "accelerator", { values: { name: "custom" } }));
  const useCustom = el("input", { type: "checkbox", id: "use-custom", name: "use-custom" });
  useCustom.addEventListener("change", () => { custom.hidden = !useCustom.checked; });
  return el("fieldset", { dataset: { path: "accelerators" } }, el("legend", { text: "Accelerators" }),
    el("div", { class: "error", role: "alert" }),
    presetBoxes,
    el("div", { class: "field check" }, useCustom, el("label", { for: "use-custom", text: "Custom accelerator" })),
    custom);
}

function sweepPaths() {
  const paths = [];
  const add = (prefix, name) => {
    for (const [key, prop] of Object.entries(schemas[name].properties)) {
      if (key !== "name" && key !== "seed" && !prop.$ref) paths.push(`${prefix}.${key}`);
    }
  };
  add("training", "TrainingConfig");
  add("accelerator", "AcceleratorConfig");
  for (const { name, params_schema: schemaName } of offered) add(name, schemaName);
  return paths;
}

function sweepSection() {
  const rows = el("div", { id: "sweep-rows" });
  const paths = sweepPaths();
  return el("fieldset", { dataset: { path: "sweep" } }, el("legend", { text: "Sweep" }),
    el("p", { class: "hint", text: schemas.Sweep.description }),
    el("div", { class: "error", role: "alert" }),
    el("div", { class: "field", dataset: { path: "sweep.mode" } }, el("label", { for: "sweep-mode", text: "Sweep mode" }),
      el("select", { id: "sweep-mode", name: "sweep-mode" }, el("option", { value: "grid", text: "grid" }), el("option", { value: "random", text: "random" })),
      el("span", { class: "hint", text: "full grid or random sample · default: grid" }), el("span", { class: "error" })),
    el("div", { class: "field", dataset: { path: "sweep.samples" } }, el("label", { for: "sweep-samples", text: "Random samples" }),
      el("input", { id: "sweep-samples", name: "sweep-samples", type: "number", min: "1", max: "100000", value: "10" }),
      el("span", { class: "hint", text: "random mode: points to draw · default: 10" }), el("span", { class: "error" })),
    rows,
    el("button", { type: "button", id: "add-axis", text: "Add sweep axis", onclick: () => { rows.append(sweepRow(paths)); refresh(); } }));
}

function checked(name) {
  return [...form.querySelectorAll(`input[name=${name}]:checked`)].map((box) => box.value);
}

/** The spec from the form, only what differs from the defaults; plus client-side errors. */
function buildSpec() {
  const errors = [];
  const spec = { name: $("f-name").value.trim() };
  const description = $("f-description").value.trim();
  if (description) spec.description = description;
  const team = $("f-team_id").value.trim();
  if (team) spec.team_id = Number(team);
  if ($("f-baseline_hardware").value !== "dense") spec.baseline_hardware = $("f-baseline_hardware").value;
  const training = readChanged(form, "training");
  if (Object.keys(training).length) spec.training = training;
  const names = checked("technique");
  spec.techniques = names.map((name) => ({ name, ...readChanged(form, `technique.${name}`) }));
  context.techniqueNames = [...names];
  if ($("compose").checked && names.length > 1) {
    spec.techniques.push(spec.techniques.map((t) => ({ ...t })));
    context.techniqueNames.push(null);
  }
  if (!names.length) errors.push({ loc: ["techniques"], msg: "check at least one technique" });
  const accelerators = checked("preset");
  if ($("use-custom").checked) accelerators.push(readAll(form, "accelerator"));
  if (!accelerators.length) errors.push({ loc: ["accelerators"], msg: "choose at least one accelerator" });
  spec.accelerators = accelerators;
  const seeds = $("f-seeds").value.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (!seeds.length || seeds.some((s) => !Number.isInteger(s) || s < 0)) errors.push({ loc: ["seeds"], msg: "seeds are whole numbers ≥ 0, comma-separated" });
  else if (!(seeds.length === 1 && seeds[0] === 0)) spec.seeds = seeds;
  const sweep = readSweep(form);
  errors.push(...sweep.errors);
  if (Object.keys(sweep.parameters).length) {
    spec.sweep = { parameters: sweep.parameters };
    if ($("sweep-mode").value === "random") Object.assign(spec.sweep, { mode: "random", samples: Number($("sweep-samples").value) });
  }
  for (const control of form.querySelectorAll("input, select, textarea")) {
    if (control.closest("[hidden]") || control.validity.valid) continue;
    const wrapper = control.closest(".field");
    errors.push({ loc: (wrapper?.dataset.path || control.name).split("."), msg: control.validationMessage });
  }
  return { spec, errors };
}

let previewTimer = null;
let previewSeq = 0;

function showSpec(spec) {
  const format = form.ownerDocument.querySelector("input[name=spec-format]:checked").value;
  $("spec-text").textContent = specText(spec, format);
}

async function preview() {
  const seq = ++previewSeq;
  clearErrors(form, errorBox);
  const { spec, errors } = buildSpec();
  showSpec(spec);
  if (errors.length) {
    showErrors(form, errorBox, errors, context);
    $("preview").textContent = "fix the marked fields";
    return null;
  }
  try {
    const result = await postJson(`${API}/experiments/preview`, spec);
    if (seq === previewSeq) {
      $("preview").textContent = `${result.runs} runs (${result.trainings} trainings, ${result.baseline_runs} baseline runs)`;
    }
    return spec;
  } catch (error) {
    if (seq !== previewSeq) return null;
    $("preview").textContent = "the server refused this spec";
    if (error instanceof ApiError && error.fieldErrors.length) showErrors(form, errorBox, error.fieldErrors, context);
    else errorBox.textContent = describe(error);
    return null;
  }
}

function refresh() {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(preview, 350);
}

async function submit(event) {
  event.preventDefault();
  clearTimeout(previewTimer);
  const spec = await preview();
  if (!spec) return;
  $("submit-button").disabled = true;
  try {
    const experiment = await postJson(`${API}/experiments`, spec);
    location.href = `/?experiment_id=${experiment.id}`;
  } catch (error) {
    $("submit-button").disabled = false;
    if (error instanceof ApiError && error.fieldErrors.length) showErrors(form, errorBox, error.fieldErrors, context);
    else errorBox.textContent = describe(error);
  }
}

/** Fill the form from a stored spec (cloning an experiment): every field it sets, as it set it. */
function loadSpec(spec) {
  $("f-name").value = `${spec.name} (copy)`.slice(0, 200);
  $("f-description").value = spec.description || "";
  $("f-team_id").value = spec.team_id ?? "";
  $("f-baseline_hardware").value = spec.baseline_hardware || "dense";
  $("f-seeds").value = (spec.seeds || [0]).join(", ");
  fill(form, "training", spec.training || {});
  const sets = spec.techniques || [];
  const single = sets.filter((set) => !Array.isArray(set));
  for (const { name } of offered) {
    const params = single.find((t) => t.name === name);
    const box = $(`use-${name}`);
    box.checked = Boolean(params);
    box.dispatchEvent(new Event("change"));
    if (params) fill(form, `technique.${name}`, params);
  }
  $("compose").checked = sets.some(Array.isArray);
  for (const box of form.querySelectorAll("input[name=preset]")) box.checked = (spec.accelerators || []).includes(box.value);
  const custom = (spec.accelerators || []).find((a) => typeof a === "object");
  $("use-custom").checked = Boolean(custom);
  $("use-custom").dispatchEvent(new Event("change"));
  if (custom) fill(form, "accelerator", custom);
  const rows = $("sweep-rows");
  rows.replaceChildren();
  const sweep = spec.sweep || { parameters: {} };
  $("sweep-mode").value = sweep.mode || "grid";
  $("sweep-samples").value = sweep.samples ?? 10;
  for (const [path, axis] of Object.entries(sweep.parameters || {})) {
    const kind = axis.values ? "values" : axis.low !== null && axis.low !== undefined ? "interval" : "range";
    const row = sweepRow(sweepPaths(), { path, kind, values: (axis.values || []).join(", ") });
    for (const name of ["start", "stop", "step", "low", "high"]) {
      if (axis[name] !== null && axis[name] !== undefined) row.querySelector(`[name=sweep-${name}]`).value = axis[name];
    }
    row.querySelector("[name=sweep-integer]").checked = Boolean(axis.integer);
    row.querySelector("[name=sweep-log]").checked = Boolean(axis.log);
    rows.append(row);
  }
}

async function main() {
  let techniques;
  [schemas, presets, techniques, saved] = await Promise.all([loadSchemas(), getJson(`${API}/accelerator-presets`), loadTechniques(), getJson(`${API}/accelerators`)]);
  offered = techniques.filter((technique) => technique.name !== "baseline");
  context.techniques = techniques.map((technique) => technique.name);
  context.acceleratorFields = Object.keys(schemas.AcceleratorConfig.properties);
  $("form-body").replaceChildren(experimentSection(), trainingSection(), techniquesSection(), acceleratorsSection(), sweepSection());
  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  form.addEventListener("submit", submit);
  for (const radio of document.querySelectorAll("input[name=spec-format]")) radio.addEventListener("change", () => showSpec(buildSpec().spec));
  $("copy-spec").addEventListener("click", () => navigator.clipboard?.writeText($("spec-text").textContent));
  const cloned = new URLSearchParams(location.search).get("clone");
  if (cloned) {
    const experiment = await getJson(`${API}/experiments/${encodeURIComponent(cloned)}`);
    loadSpec(experiment.spec);
    $("notice").textContent = `A copy of experiment #${experiment.id} “${experiment.name}”: change what you like, then submit.`;
  }
  form.dataset.ready = "true";
  await preview();
}

main().catch((error) => { errorBox.textContent = describe(error); });

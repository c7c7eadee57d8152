// The submit page: a form generated from the API's schema, a live run-count preview, server
// errors beside their fields, and the spec as YAML/JSON for the CLI. A spec opens in the form
// from an experiment (Clone), a YAML or JSON file or a paste; what the form cannot show of it
// (a composition other than "all checked techniques", a second custom accelerator, `sweep.seed`,
// a key the form does not know, a value its field cannot hold) is kept as written, submitted
// in its place and listed above the form.

import { API, ApiError, describe, getJson, postJson } from "../api.js";
import { el } from "../format.js";
import { loadSchemas } from "../schema.js";
import { fill, objectFields, readAll, readChanged } from "../schema-fields.js";
import { clearErrors, showErrors } from "../spec-errors.js";
import { parseSpec, specText } from "../spec-text.js";
import { readSweep, sweepRow } from "../sweep-rows.js";
import { loadTechniques } from "../techniques.js";

const $ = (id) => document.getElementById(id);
const form = $("spec-form");
const errorBox = $("form-errors");
let schemas = null;
let presets = {};
let saved = []; // the user's own accelerators (GET /accelerators), full configs
let offered = []; // the server's techniques but the baseline every technique runs against
let teams = null; // the teams you may submit to, or null in single-user mode
let opened = null; // the order and the kept parts of the spec the form was opened from
let context = { techniques: [], techniqueNames: [], acceleratorFields: [], kept: new Set() };

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
    teamField(props.team_id.description),
    el("div", { class: "field", dataset: { path: "baseline_hardware" } },
      el("label", { for: "f-baseline_hardware", text: "Baseline hardware" }),
      el("select", { id: "f-baseline_hardware", name: "baseline_hardware" },
        el("option", { value: "dense", text: "dense (every extension off)" }),
        el("option", { value: "same", text: "same (own accelerator, zero-skipping on)" })),
      el("span", { class: "hint", text: props.baseline_hardware.description }),
      el("span", { class: "error", "aria-live": "polite" })),
    textField("description", "Description", { rows: "2", maxlength: "5000" }, props.description.description));
}

/** A team picker of your teams where you may submit (owner or member); hidden in single-user
 * mode, where there are no teams. */
function teamField(description) {
  return el("div", { class: "field", dataset: { path: "team_id" }, hidden: teams === null },
    el("label", { for: "f-team_id", text: "Share with team" }),
    el("select", { id: "f-team_id", name: "team_id" },
      el("option", { value: "", text: "none (only you)" }),
      (teams || []).map((team) => el("option", { value: String(team.id), text: `${team.name} (${team.role})` }))),
    el("span", { class: "hint", text: description }),
    el("span", { class: "error", "aria-live": "polite" }));
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
  const kept = opened?.kept || { top: {}, training: {}, params: {}, sweep: {} };
  const training = { ...readChanged(form, "training"), ...kept.training };
  if (Object.keys(training).length) spec.training = training;
  const names = checked("technique");
  const params = new Map(names.map((name) => [name, { name, ...readChanged(form, `technique.${name}`), ...kept.params[name] }]));
  const composed = $("compose").checked && names.length > 1;
  const sets = inOpenedOrder(opened?.techniques, params, composed ? "composed" : null);
  const singles = sets.filter((set) => set.form).map((set) => set.item);
  spec.techniques = sets.map((set) => (set.slot === "composed" ? singles.map((t) => ({ ...t })) : set.item));
  context.techniqueNames = sets.map((set) => (set.form ? set.item.name : null));
  if (!names.length && !sets.length) errors.push({ loc: ["techniques"], msg: "check at least one technique" });
  const chosen = new Map(checked("preset").map((name) => [name, name]));
  const accelerators = inOpenedOrder(opened?.accelerators, chosen, $("use-custom").checked ? "custom" : null);
  spec.accelerators = accelerators.map((set) => (set.slot === "custom" ? readAll(form, "accelerator") : set.item));
  if (!spec.accelerators.length) errors.push({ loc: ["accelerators"], msg: "choose at least one accelerator" });
  context.kept = new Set([
    ...sets.flatMap((set, index) => (set.kept ? [`techniques.${index}`] : [])),
    ...accelerators.flatMap((set, index) => (set.kept ? [`accelerators.${index}`] : [])),
  ]);
  const seeds = $("f-seeds").value.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (!seeds.length || seeds.some((s) => !Number.isInteger(s) || s < 0)) errors.push({ loc: ["seeds"], msg: "seeds are whole numbers ≥ 0, comma-separated" });
  else if (!(seeds.length === 1 && seeds[0] === 0)) spec.seeds = seeds;
  const sweep = readSweep(form);
  errors.push(...sweep.errors);
  if (Object.keys(sweep.parameters).length || Object.keys(kept.sweep).length) {
    spec.sweep = { parameters: sweep.parameters };
    if ($("sweep-mode").value === "random") Object.assign(spec.sweep, { mode: "random", samples: Number($("sweep-samples").value) });
    Object.assign(spec.sweep, kept.sweep);
    if (kept.sweep.parameters) spec.sweep.parameters = { ...sweep.parameters, ...kept.sweep.parameters };
  }
  Object.assign(spec, kept.top);
  for (const control of form.querySelectorAll("input, select, textarea")) {
    if (control.closest("[data-path]")?.dataset.path in kept.top) continue;
    if (control.closest("[hidden]") || control.validity.valid) continue;
    const wrapper = control.closest(".field");
    errors.push({ loc: (wrapper?.dataset.path || control.name).split("."), msg: control.validationMessage });
  }
  return { spec, errors: errors.filter((error) => !(error.loc[0] in kept.top)) };
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

/** A new spec in the form: no count until the server has seen it. */
function previewAfresh() {
  $("preview").textContent = "–";
  refresh();
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

/** The form's items (key -> item) and one extra slot ("composed", "custom") in the order of the
 * opened spec, with its kept items in their places; what the form added since comes last. */
function inOpenedOrder(tokens = [], items, slot) {
  const out = [];
  const placed = new Set();
  for (const token of tokens) {
    if ("kept" in token) out.push({ item: token.kept, kept: true });
    else if (token.slot) {
      if (token.slot === slot && !placed.has(slot)) out.push({ slot });
      placed.add(token.slot);
    } else if (items.has(token.key) && !placed.has(token.key)) {
      out.push({ item: items.get(token.key), form: true });
      placed.add(token.key);
    }
  }
  for (const [key, item] of items) if (!placed.has(key)) out.push({ item, form: true });
  if (slot && !out.some((entry) => entry.slot === slot)) out.push({ slot });
  return out;
}

const isMapping = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
/** JSON with sorted keys: equal for equal specs, whatever order their keys were written in. */
const canonical = (value) => JSON.stringify(value, (_, v) => (isMapping(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v));
const same = (a, b) => canonical(a) === canonical(b);

/** [path, value] of every leaf under a mapping (a leaf: anything but a mapping). */
function leaves(value, prefix = "") {
  return Object.entries(value).flatMap(([key, item]) => (isMapping(item) ? leaves(item, `${prefix}${key}.`) : [[`${prefix}${key}`, item]]));
}

/** Fill the fields under `prefix` with `values`; returns the [path, value] leaves no field holds
 * as written (an unknown key, a value of another type). With `written`, the shown fields are
 * submitted even at their default, as the spec wrote them. */
function fillSection(prefix, values, written) {
  fill(form, prefix, values);
  const shown = readAll(form, prefix);
  const left = [];
  for (const [path, value] of leaves(values)) {
    const now = path.split(".").reduce((node, part) => (isMapping(node) ? node[part] : undefined), shown);
    if (now === undefined || !same(now, value)) left.push([path, value]);
    else if (written) form.querySelector(`.field[data-path="${CSS.escape(`${prefix}.${path}`)}"]`).dataset.written = "true";
  }
  return left;
}

/** The nested mapping of [path, value] leaves. */
function nest(pairs) {
  const out = {};
  for (const [path, value] of pairs) {
    const parts = path.split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) node = node[part] ??= {};
    node[parts.at(-1)] = value;
  }
  return out;
}

const show = (value) => (typeof value === "string" ? value : JSON.stringify(value));
const techniqueLabel = (set) => (isMapping(set) ? show(set.name) : show(set));

/** Fill the form from a spec. A stored one (Clone, `copy`) gets " (copy)" on its name; one
 * opened from a file or a paste keeps its name and writes out the fields it wrote. The rest is
 * kept in `opened` (see the module's doc); returns what was kept, in words. */
function loadSpec(spec, { copy = false } = {}) {
  buildForm();
  const written = !copy;
  const kept = { top: {}, training: {}, params: {}, sweep: {} };
  const notes = [];
  const keep = (key, value, why) => {
    kept.top[key] = value;
    notes.push(`${key}: ${why}`);
  };
  const known = new Set(Object.keys(schemas.ExperimentSpec.properties));
  for (const [key, value] of Object.entries(spec)) if (!known.has(key)) keep(key, value, "not a field the form knows");

  if (typeof spec.name === "string") $("f-name").value = copy ? `${spec.name} (copy)`.slice(0, 200) : spec.name;
  else if ("name" in spec) keep("name", spec.name, "not text");
  if (typeof (spec.description ?? "") === "string") $("f-description").value = spec.description ?? "";
  else keep("description", spec.description, "not text");
  const team = spec.team_id ?? "";
  if ([...$("f-team_id").options].some((option) => option.value === String(team))) $("f-team_id").value = String(team);
  else keep("team_id", spec.team_id, teams === null ? "no teams in single-user mode" : "not one of the teams you may submit to");
  const hardware = spec.baseline_hardware ?? "dense";
  if (["dense", "same"].includes(hardware)) $("f-baseline_hardware").value = hardware;
  else keep("baseline_hardware", hardware, "neither dense nor same");
  const seeds = spec.seeds ?? [0];
  if (Array.isArray(seeds) && seeds.length && seeds.every((seed) => Number.isInteger(seed) && seed >= 0)) $("f-seeds").value = seeds.join(", ");
  else keep("seeds", spec.seeds, "not a list of whole numbers");

  if (isMapping(spec.training ?? {})) {
    const left = fillSection("training", spec.training ?? {}, written);
    kept.training = nest(left);
    notes.push(...left.map(([path, value]) => `training.${path} = ${show(value)}: no field of the form holds it`));
  } else keep("training", spec.training, "not a mapping");

  const techniques = [];
  const setNotes = []; // by index, so the list reads in the spec's order
  if (Array.isArray(spec.techniques)) {
    spec.techniques.forEach((set, index) => {
      const name = isMapping(set) ? set.name : null;
      if (Array.isArray(set)) techniques.push({ composition: set, index });
      else if (!offered.some((technique) => technique.name === name)) {
        techniques.push({ kept: set });
        setNotes[index] = `techniques[${index}] (${techniqueLabel(set)}): not a technique the form offers`;
      } else if (techniques.some((token) => token.key === name)) {
        techniques.push({ kept: set });
        setNotes[index] = `techniques[${index}] (${name}): a second ${name}, with its own knobs`;
      } else {
        const box = $(`use-${name}`);
        box.checked = true;
        box.dispatchEvent(new Event("change"));
        const { name: _, ...knobs } = set;
        const left = fillSection(`technique.${name}`, knobs, written);
        kept.params[name] = nest(left);
        setNotes[index] = left.map(([path, value]) => `techniques[${index}].${path} = ${show(value)}: no field of the form holds it`).join("; ") || undefined;
        techniques.push({ key: name, index });
      }
    });
    for (const { name } of offered) {
      const box = $(`use-${name}`);
      if (!techniques.some((token) => token.key === name) && box.checked) {
        box.checked = false;
        box.dispatchEvent(new Event("change"));
      }
    }
    // The compose box means "all checked techniques, with their knobs, in one run": the first
    // composition that is exactly that is shown by it, any other is kept.
    const singles = techniques.filter((token) => token.key).map((token) => spec.techniques[token.index]);
    techniques.forEach((token, position) => {
      if (!token.composition) return;
      if (!$("compose").checked && singles.length > 1 && same(token.composition, singles)) {
        $("compose").checked = true;
        techniques[position] = { slot: "composed" };
      } else {
        techniques[position] = { kept: token.composition };
        setNotes[token.index] = `techniques[${token.index}]: the composition ${token.composition.map(techniqueLabel).join(" + ")}`;
      }
    });
    notes.push(...setNotes.filter(Boolean));
  } else if ("techniques" in spec) keep("techniques", spec.techniques, "not a list");

  const accelerators = [];
  if (Array.isArray(spec.accelerators ?? ["tpu-like"])) {
    for (const box of form.querySelectorAll("input[name=preset]")) box.checked = false;
    (spec.accelerators ?? ["tpu-like"]).forEach((choice, index) => {
      const box = typeof choice === "string" ? form.querySelector(`input[name=preset][value="${CSS.escape(choice)}"]`) : null;
      if (box && !box.checked) {
        box.checked = true;
        accelerators.push({ key: choice });
      } else if (isMapping(choice) && !$("use-custom").checked) {
        const defaults = readAll(form, "accelerator");
        const left = fillSection("accelerator", choice, false);
        if (left.length) {
          fill(form, "accelerator", defaults);
          accelerators.push({ kept: choice });
          notes.push(`accelerators[${index}] (${show(choice.name ?? "custom")}): fields the form cannot show (${left.map(([path]) => path).join(", ")})`);
        } else {
          $("use-custom").checked = true;
          $("use-custom").dispatchEvent(new Event("change"));
          accelerators.push({ slot: "custom" });
        }
      } else {
        accelerators.push({ kept: choice });
        notes.push(`accelerators[${index}] (${show(isMapping(choice) ? choice.name ?? "custom" : choice)}): ${isMapping(choice) ? "a second custom accelerator" : box ? "a preset listed twice" : "not a preset the server offers"}`);
      }
    });
  } else keep("accelerators", spec.accelerators, "not a list");

  if (isMapping(spec.sweep)) {
    const { mode = "grid", samples = 10, parameters = {}, ...rest } = spec.sweep;
    if (["grid", "random"].includes(mode)) $("sweep-mode").value = mode;
    else rest.mode = mode;
    if (Number.isInteger(samples) && samples >= 1 && (mode === "random" || samples === 10)) $("sweep-samples").value = samples;
    else rest.samples = samples;
    const axes = isMapping(parameters) ? parameters : {};
    if (!isMapping(parameters)) rest.parameters = parameters;
    for (const [path, axis] of Object.entries(axes)) {
      const row = isMapping(axis) ? axisRow(path, axis) : null;
      if (row) $("sweep-rows").append(row);
      const shown = readSweep($("sweep-rows")).parameters[path];
      if (!row || shown === undefined || !same(shown, withoutDefaults(axis))) {
        row?.remove();
        (rest.parameters ??= {})[path] = axis;
      }
    }
    Object.assign(kept.sweep, rest);
    notes.push(...Object.entries(rest).map(([key, value]) => `sweep.${key} = ${canonical(value)}: no field of the form holds it`));
  } else if (spec.sweep !== undefined && spec.sweep !== null) keep("sweep", spec.sweep, "not a mapping");
  if (spec.search !== undefined && spec.search !== null) keep("search", spec.search, "a hardware design search: the form has no fields for it, it is submitted as written");
  opened = { techniques, accelerators, kept };
  showKept(notes);
  return notes;
}

/** A sweep row showing `axis`. */
function axisRow(path, axis) {
  const kind = axis.values ? "values" : axis.low !== null && axis.low !== undefined ? "interval" : "range";
  const row = sweepRow(sweepPaths(), { path, kind, values: (axis.values || []).join(", ") });
  for (const name of ["start", "stop", "step", "low", "high"]) {
    if (axis[name] !== null && axis[name] !== undefined) row.querySelector(`[name=sweep-${name}]`).value = axis[name];
  }
  row.querySelector("[name=sweep-integer]").checked = Boolean(axis.integer);
  row.querySelector("[name=sweep-log]").checked = Boolean(axis.log);
  return row;
}

/** An axis without the fields at their defaults (null bounds, `log`/`integer` false). */
function withoutDefaults(axis) {
  return Object.fromEntries(Object.entries(axis).filter(([, value]) => value !== null && value !== false));
}

/** List what the opened spec keeps beside the form, with a button to leave it out. */
function showKept(notes) {
  const box = $("kept");
  box.hidden = !notes.length;
  if (!notes.length) {
    box.replaceChildren();
    return;
  }
  const leaveOut = () => {
    opened = {
      techniques: opened.techniques.filter((token) => !("kept" in token)),
      accelerators: opened.accelerators.filter((token) => !("kept" in token)),
      kept: { top: {}, training: {}, params: {}, sweep: {} },
    };
    showKept([]);
    previewAfresh();
  };
  box.replaceChildren(
    el("strong", { text: "Kept as written, not shown in the form: " }),
    "these parts of the spec are submitted as they are (the spec for the CLI below holds them).",
    el("ul", {}, notes.map((note) => el("li", { text: note }))),
    el("button", { type: "button", id: "leave-out-kept", text: "Leave them out", onclick: leaveOut }));
}

function buildForm() {
  opened = null;
  $("form-body").replaceChildren(experimentSection(), trainingSection(), techniquesSection(), acceleratorsSection(), sweepSection());
}

/** Open a YAML or JSON text in the form; its parse error, if any, is thrown. */
function openText(text, source) {
  const spec = parseSpec(text);
  clearErrors(form, errorBox);
  loadSpec(spec);
  $("notice").textContent = `Opened ${source}: change what you like, then submit.`;
  previewAfresh();
}

async function openFile(input) {
  const [file] = input.files;
  if (!file) return;
  try {
    openText(await file.text(), `“${file.name}”`);
  } catch (error) {
    errorBox.textContent = `Cannot open “${file.name}”: ${error.message}`;
  } finally {
    input.value = ""; // choosing the same file again opens it again
  }
}

function pasteDialog() {
  const dialog = $("paste-dialog");
  $("paste-spec").addEventListener("click", () => {
    $("paste-error").textContent = "";
    dialog.showModal();
    $("paste-text").focus();
  });
  $("paste-cancel").addEventListener("click", () => dialog.close());
  $("paste-open").addEventListener("click", () => {
    try {
      openText($("paste-text").value, "the pasted spec");
      dialog.close();
    } catch (error) {
      $("paste-error").textContent = error.message;
    }
  });
}
async function main() {
  let techniques, me;
  [schemas, presets, techniques, me, saved] = await Promise.all([loadSchemas(), getJson(`${API}/accelerator-presets`), loadTechniques(), getJson(`${API}/auth/me`), getJson(`${API}/accelerators`)]);
  teams = me.mode === "single-user" ? null : me.teams.filter((team) => team.role !== "viewer");
  offered = techniques.filter((technique) => technique.name !== "baseline");
  context.techniques = techniques.map((technique) => technique.name);
  context.acceleratorFields = Object.keys(schemas.AcceleratorConfig.properties);
  buildForm();
  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  form.addEventListener("submit", submit);
  for (const radio of document.querySelectorAll("input[name=spec-format]")) radio.addEventListener("change", () => showSpec(buildSpec().spec));
  $("copy-spec").addEventListener("click", () => navigator.clipboard?.writeText($("spec-text").textContent));
  $("spec-file").addEventListener("change", (event) => openFile(event.target));
  pasteDialog();
  const cloned = new URLSearchParams(location.search).get("clone");
  if (cloned) {
    const experiment = await getJson(`${API}/experiments/${encodeURIComponent(cloned)}`);
    loadSpec(experiment.spec, { copy: true });
    $("notice").textContent = `A copy of experiment #${experiment.id} “${experiment.name}”: change what you like, then submit.`;
  }
  form.dataset.ready = "true";
  await preview();
}

main().catch((error) => { errorBox.textContent = describe(error); });

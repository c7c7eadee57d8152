// The technique papers: each headline next to this installation's results of its miniature
// (mean and 95% interval over seeds, per accelerator preset), and a button submitting it.

import { API, describe, getJson, postJson } from "../api.js";
import { el, formatEstimate, formatValue } from "../format.js";
import { isoAreaBudget, isoAreaDesigns } from "../iso-area.js";

const root = document.getElementById("papers");
const errors = document.getElementById("page-errors");

/** "mean ± half-width" of an estimate (the interval in full on hover); n = 1 has no interval. */
function estimateCell(estimate, unit) {
  if (!estimate) return el("td", { class: "num muted", text: "–" });
  const format = (value) => formatValue(value, unit);
  const mean = format(estimate.mean);
  if (estimate.ci_low === null) {
    return el("td", { class: "num", title: "one seed: no interval" }, mean, el("span", { class: "muted", text: " (n = 1)" }));
  }
  const half = (estimate.ci_high - estimate.ci_low) / 2;
  return el("td", { class: "num estimate", title: `95% interval ${format(estimate.ci_low)} to ${format(estimate.ci_high)}, n = ${estimate.n}` },
    formatEstimate(estimate.mean, half, unit));
}

/** The runs' stall share with their baselines' beside it, each mean ± half-width. */
function stallCell(group) {
  const [run, baseline] = [group.stall_share, group.baseline_stall_share].map((e) => estimateCell(e, "%").textContent);
  return el("td", { class: "num stall", title: "share of the cycles spent waiting on DRAM: the runs', then their baselines'" },
    run, el("span", { class: "muted", text: `baseline ${baseline}` }));
}

function headlineRow(paper) {
  const { headline } = paper;
  return el("tr", { class: "headline-row" },
    el("th", { scope: "row", text: `Paper (${paper.venue})` }),
    el("td", { class: "num muted", text: "its own networks" }),
    el("td", { class: "num", text: formatValue(headline.speedup, "×") }),
    el("td", { class: "num muted", text: "–" }),
    el("td", { class: "num", text: headline.energy_ratio === null ? "not reported" : formatValue(headline.energy_ratio, "×") }),
    el("td", { class: "num muted", text: "–" }),
    el("td", { class: "num muted", text: "–" }),
    el("td", { class: "num", text: headline.accuracy }),
    el("td", { class: "muted", text: "" }),
    el("td", { class: "muted", text: "" }));
}

function groupRow(group) {
  const swept = Object.entries(group.params)
    .filter(([key]) => !["technique", "accelerator", "seed"].includes(key))
    .map(([key, value]) => `${key}=${value}`).join(", ");
  return el("tr", { dataset: { accelerator: group.accelerator_name } },
    el("th", { scope: "row" }, `Ours on ${group.accelerator_name}`, swept ? el("span", { class: "muted", text: ` (${swept})` }) : ""),
    el("td", { class: "num", text: `${group.done} of ${group.run_ids.length}` }),
    estimateCell(group.speedup, "×"),
    stallCell(group),
    estimateCell(group.energy_ratio, "×"),
    estimateCell(group.iso_area_speedup, "×"),
    estimateCell(group.iso_area_energy_ratio, "×"),
    estimateCell(group.accuracy_delta, "pt"),
    el("td", { class: `verdict verdict-${group.verdict.split(" ")[0]}`, title: group.verdict_why, text: group.verdict }),
    el("td", { class: "iso-designs", title: isoAreaBudget(group.iso_area), text: isoAreaDesigns(group.iso_area) }));
}

function resultsTable(paper) {
  const head = el("tr", {}, ["", "Seeds done", "Speedup (same array)", "Stall share", "Energy ratio (same array)",
    "Iso-area speedup", "Iso-area energy ratio", "Accuracy (Δ to baseline)", "Verdict", "Iso-area dense designs"]
    .map((h, i) => el("th", { scope: "col", class: i && i < 8 ? "num" : undefined, text: h })));
  const rows = [headlineRow(paper), ...paper.groups.map(groupRow)];
  return el("table", { class: "data paper-results", "aria-label": `${paper.title}: paper and ours` },
    el("thead", {}, head), el("tbody", {}, rows));
}

/** What the ± and the verdict are, said once under each table. */
function verdictNote() {
  return el("p", { class: "muted verdict-note" },
    "± is the half-width of the 95% Student-t interval over seeds: it covers the seeds only, not the "
    + "preset's assumptions. Verdict: reproduces when the speedup's interval lies above 1, its lower "
    + "bound reaches half the paper's gain in log terms and the accuracy change's interval lies above −1 point; "
    + "no gain when the speedup's interval lies below 1.05; partial gain, loses accuracy or inconclusive "
    + "otherwise (hover a verdict for its reason). Energy is shown beside it and is not part of it. "
    + "Same array: against the run's baseline, its accelerator with the extensions off. Iso-area: against "
    + "the fastest (speedup = its time / the run's) and the lowest-energy (ratio = the run's energy / its) "
    + "dense designs of equal or smaller area, at the same clock, dataflow and node, running the "
    + "baseline's training. Stall share: cycles spent waiting on DRAM.");
}

function miniatureLine(spec) {
  const t = spec.training;
  return `Miniature: ${t.model} on ${t.dataset} (${t.train_samples.toLocaleString("en-US")} images, ${t.epochs} epochs), `
    + `${spec.seeds.length} seeds, on ${spec.accelerators.join(", ")}.`;
}

/** What this installation measured about the technique beyond the verdict. */
function findingsList(paper) {
  return el("div", { class: "findings" }, el("h3", { text: "Measured here" }),
    el("ul", {}, paper.findings.map((finding) => el("li", { text: finding }))));
}

/** Disabled while submitting and once submitted (a second click would run it all again);
 * enabled again only when the submission failed. */
function submitButton(paper, status) {
  const button = el("button", { type: "button", class: "primary", text: "Submit miniature", "aria-label": `submit the ${paper.key} miniature` });
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Submitting…";
    status.replaceChildren("Submitting…");
    try {
      const experiment = await postJson(`${API}/experiments`, paper.miniature);
      button.textContent = "Submitted";
      status.replaceChildren("Submitted: ", el("a", { href: `/experiments/${experiment.id}`, class: "submitted", text: `experiment #${experiment.id}` }),
        ` (${experiment.total_runs} runs). Reload the page to submit it again.`);
    } catch (error) {
      button.disabled = false;
      button.textContent = "Submit miniature";
      status.replaceChildren(el("span", { class: "failure-reason", text: `Not submitted: ${describe(error)}` }));
    }
  });
  return button;
}

function paperCard(paper) {
  const status = el("span", { class: "submit-status", "aria-live": "polite" });
  const experiments = paper.experiment_ids.length
    ? el("p", { class: "muted" }, "From ", ...paper.experiment_ids.flatMap((id, i) => [i ? ", " : "", el("a", { href: `/experiments/${id}`, text: `experiment #${id}` })]), ".")
    : null;
  const results = paper.groups.length
    ? resultsTable(paper)
    : el("p", { class: "no-runs muted", text: "No stored runs yet: submit the miniature to measure it here." });
  const body = [
    el("h2", { text: paper.title }),
    el("p", { class: "headline" }, el("strong", { text: `${paper.venue}: ` }), paper.headline.text),
    el("p", { class: "muted", text: miniatureLine(paper.miniature) }),
    paper.findings.length ? findingsList(paper) : null,
    paper.groups.length ? el("div", { class: "scroll" }, results) : results,
    paper.groups.length ? verdictNote() : null,
    experiments,
    el("div", { class: "row actions" }, submitButton(paper, status), " ", status),
    el("details", {}, el("summary", { text: "The miniature's spec" }), el("pre", { class: "spec", text: JSON.stringify(paper.miniature, null, 2) })),
  ].filter(Boolean);
  return el("section", { class: "card paper", dataset: { paper: paper.key }, "aria-label": paper.title }, ...body);
}

async function main() {
  try {
    const papers = await getJson(`${API}/papers`);
    root.replaceChildren(...papers.map(paperCard));
  } catch (error) {
    errors.textContent = `Cannot show the papers: ${describe(error)}`;
  }
}

main();

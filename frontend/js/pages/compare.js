// Compare runs (/compare?ids=1,2) or open a saved dashboard (/dashboards/<id>): charts, save, share.

import { API, describe, getJson, patchJson, postJson, query } from "../api.js";
import { drawCharts, redrawChart } from "../chart-panel.js";
import { chartPicker } from "../chart-picker.js";
import { CHART_IDS } from "../charts/registry.js";
import { ShareLinks } from "../share-links.js";
import { groupTable } from "../group-table.js";
import { el } from "../format.js";
import { showPageError } from "../page-errors.js";
import { textEditor } from "../text-blocks.js";

const $ = (id) => document.getElementById(id);
const dashboardMatch = location.pathname.match(/^\/dashboards\/([^/]+)$/);
const state = { dashboard: null, runIds: [], charts: [...CHART_IDS], texts: [], data: { runs: [], design_points: [] } };

function showError(message) {
  $("page-errors").textContent = message;
}

function notice(message) {
  $("notice").textContent = message;
}

function parseIds(text) {
  return (text || "").split(",").map((part) => Number(part.trim())).filter((n) => Number.isInteger(n) && n > 0);
}

async function redraw() {
  const runs = state.data.runs;
  $("run-summary").textContent = runs.length
    ? `${runs.length} run(s): ${runs.map((r) => `#${r.id}`).join(", ")}`
    : "No runs selected: pick runs in the run table and press “Compare selected”.";
  await Promise.all([
    groupTable($("group-summary"), runs),
    drawCharts($("charts"), state.charts, runs, state.dashboard ? state.dashboard.texts : [], state.data.design_points),
  ]);
}

function fieldError(field, message) {
  const input = $(`dashboard-${field}`);
  input.setAttribute("aria-invalid", message ? "true" : "false");
  $(`dashboard-${field}-error`).textContent = message || "";
}

function showFieldErrors(error) {
  let placed = false;
  for (const item of error.fieldErrors || []) {
    const field = (item.loc || []).filter((p) => p !== "body")[0];
    if (field === "name" || field === "team_id") {
      fieldError(field === "team_id" ? "team" : "name", item.msg);
      placed = true;
    }
  }
  if (!placed) showError(describe(error));
}

function body() {
  const team = $("dashboard-team").value;
  return {
    name: $("dashboard-name").value.trim(),
    team_id: team ? Number(team) : null,
    config: {
      ...(state.dashboard ? state.dashboard.config : {}),
      run_ids: state.runIds, charts: state.charts, texts: state.texts.filter((t) => t.markdown.trim()),
    },
  };
}

async function save(event) {
  event.preventDefault();
  fieldError("name", "");
  fieldError("team", "");
  showError("");
  const form = $("dashboard-form");
  if (!form.checkValidity()) {
    if (!$("dashboard-name").value.trim()) fieldError("name", "give the dashboard a name");
    form.reportValidity();
    return;
  }
  try {
    if (state.dashboard) {
      state.dashboard = await patchJson(`${API}/dashboards/${state.dashboard.id}`, body());
      notice(`Saved dashboard “${state.dashboard.name}”.`);
      await redraw();
    } else {
      const created = await postJson(`${API}/dashboards`, body());
      location.href = `/dashboards/${created.id}?saved=1`;
    }
  } catch (error) {
    showFieldErrors(error);
  }
}

async function loadDashboard(id) {
  state.dashboard = await getJson(`${API}/dashboards/${encodeURIComponent(id)}`);
  const config = state.dashboard.config;
  state.runIds = config.run_ids || [];
  state.charts = config.charts || [...CHART_IDS];
  state.texts = config.texts || [];
  document.title = `${state.dashboard.name} · Orrery`;
  $("title").textContent = `Dashboard: ${state.dashboard.name}`;
  $("dashboard-name").value = state.dashboard.name;
  $("save-dashboard").textContent = "Save changes";
  if (new URLSearchParams(location.search).get("saved")) notice(`Saved dashboard “${state.dashboard.name}”.`);
  if (!state.dashboard.can_edit) {
    $("dashboard-form").hidden = true;
  } else if (state.dashboard.can_manage) {
    $("share").hidden = false;
    const links = new ShareLinks($("share"), state.dashboard.id, showError);
    await links.load();
  } else {
    // Team members change the name and config; its team is for its owner and team owners.
    $("dashboard-team").disabled = true;
  }
  state.data = await getJson(`${API}/dashboards/${encodeURIComponent(id)}/data`);
}

const OPEN = new Set(["queued", "running"]);
const FOLLOW_MS = 3000;

async function chartData() {
  if (dashboardMatch) return getJson(`${API}/dashboards/${encodeURIComponent(state.dashboard.id)}/data`);
  return getJson(`${API}/chart-data${query({ ids: state.runIds })}`);
}

/** While a compared run is open, its training curves grow as its epochs are stored; once none
 * is, every chart is drawn again with the finished runs' figures. */
function followOpenRuns() {
  if (!state.data.runs.some((run) => OPEN.has(run.status))) return;
  setTimeout(async () => {
    try {
      state.data = await chartData();
      if (state.data.runs.some((run) => OPEN.has(run.status))) {
        await redrawChart($("charts"), "curves", state.data.runs);
      } else {
        await redraw();
      }
      followOpenRuns();
    } catch (error) {
      showError(`Stopped following the open runs: ${describe(error)}`);
    }
  }, FOLLOW_MS);
}

/** The team picker: your teams where you are not only a viewer (a dashboard's own team too,
 * shown by id when you are not in it); hidden in single-user mode, which has no teams. */
async function teamPicker() {
  const me = await getJson(`${API}/auth/me`);
  if (me.mode === "single-user") return;
  const picker = $("dashboard-team");
  const teams = me.teams.filter((team) => team.role !== "viewer");
  for (const team of teams) picker.append(el("option", { value: String(team.id), text: `${team.name} (${team.role})` }));
  const own = state.dashboard?.team_id;
  if (own && !teams.some((team) => team.id === own)) picker.append(el("option", { value: String(own), text: `team #${own}` }));
  picker.value = own ? String(own) : "";
  $("dashboard-team-field").hidden = false;
}

async function main() {
  try {
    if (dashboardMatch) {
      await loadDashboard(decodeURIComponent(dashboardMatch[1]));
    } else {
      state.runIds = parseIds(new URLSearchParams(location.search).get("ids"));
      if (state.runIds.length) state.data = await getJson(`${API}/chart-data${query({ ids: state.runIds })}`);
    }
    await teamPicker();
  } catch (error) {
    showPageError(describe(error), error);
  }
  textEditor($("text-blocks"), state.texts, () => state.charts);
  chartPicker($("chart-picker"), state.charts, (charts) => {
    state.charts = charts;
    redraw();
  });
  $("dashboard-form").addEventListener("submit", save);
  await redraw();
  followOpenRuns();
}

main();

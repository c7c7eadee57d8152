// A dashboard opened through its read-only link: its summary table and charts, nothing else.

import { API, describe, getJson } from "../api.js";
import { drawCharts } from "../chart-panel.js";
import { groupTable } from "../group-table.js";
import { showPageError } from "../page-errors.js";

const token = decodeURIComponent(location.pathname.split("/").pop());

async function main() {
  try {
    const shared = await getJson(`${API}/shared/${encodeURIComponent(token)}`);
    document.title = `${shared.name} · Orrery`;
    document.getElementById("title").textContent = shared.name;
    const runs = shared.data.runs;
    document.getElementById("run-summary").textContent = `${runs.length} run(s): ${runs.map((r) => `#${r.id}`).join(", ")}`;
    await Promise.all([
      groupTable(document.getElementById("group-summary"), runs, shared.groups),
      drawCharts(document.getElementById("charts"), shared.charts, runs, shared.texts, shared.data.design_points),
    ]);
  } catch (error) {
    showPageError(describe(error), error);
  }
}

main();

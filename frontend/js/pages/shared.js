// A dashboard opened through its read-only link: its charts and nothing else.

import { API, describe, getJson } from "../api.js";
import { drawCharts } from "../chart-panel.js";

const token = decodeURIComponent(location.pathname.split("/").pop());

async function main() {
  try {
    const shared = await getJson(`${API}/shared/${encodeURIComponent(token)}`);
    document.title = `${shared.name} · Orrery`;
    document.getElementById("title").textContent = shared.name;
    const runs = shared.data.runs;
    document.getElementById("run-summary").textContent = `${runs.length} run(s): ${runs.map((r) => `#${r.id}`).join(", ")}`;
    await drawCharts(document.getElementById("charts"), shared.charts, runs, shared.texts, shared.data.design_points);
  } catch (error) {
    document.getElementById("page-errors").textContent = describe(error);
  }
}

main();

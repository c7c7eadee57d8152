// Your dashboards and your teams': open, or delete.

import { API, del, describe, getJson } from "../api.js";
import { el, formatWhen } from "../format.js";

const root = document.getElementById("dashboards");

async function load() {
  try {
    const dashboards = await getJson(`${API}/dashboards`);
    if (!dashboards.length) {
      root.replaceChildren(el("p", { class: "muted" }, "No dashboards yet: select runs in the ", el("a", { href: "/", text: "run table" }), ", compare them, and save."));
      return;
    }
    root.replaceChildren(el("table", { class: "data", "aria-label": "dashboards" },
      el("thead", {}, el("tr", {}, ["Dashboard", "Runs", "Charts", "Team", "Changed", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, dashboards.map((d) => el("tr", { dataset: { dashboardId: d.id } },
        el("td", {}, el("a", { href: `/dashboards/${encodeURIComponent(d.id)}`, text: d.name })),
        el("td", { text: String((d.config.run_ids || []).length) }),
        el("td", { text: (d.config.charts || []).join(", ") }),
        el("td", { text: d.team_id === null ? "–" : `#${d.team_id}` }),
        el("td", { text: formatWhen(d.updated_at) }),
        el("td", {}, d.can_manage ? el("button", { type: "button", class: "danger", text: "Delete", "aria-label": `delete dashboard ${d.name}`, onclick: () => remove(d) }) : ""))))));
  } catch (error) {
    root.replaceChildren(el("div", { class: "errors-box", role: "alert", text: describe(error) }));
  }
}

async function remove(dashboard) {
  if (!window.confirm(`Delete dashboard “${dashboard.name}”? Its share links stop working.`)) return;
  await del(`${API}/dashboards/${encodeURIComponent(dashboard.id)}`);
  await load();
}

load();

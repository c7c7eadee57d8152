// Saved filters on the run table page: save the table's filters and sort under a name, apply
// them later, delete them. The API keeps filters on dashboards (`config.filters`), so a saved
// filter is a dashboard of filters alone (no pinned runs, no text): it is listed with the
// dashboards too, where it opens as charts of the runs it matches, and can be shared the same way.

import { API, del, describe, getJson, postJson } from "./api.js";
import { confirmButton } from "./confirm.js";
import { el } from "./format.js";

const LISTS = ["experiment_id", "technique", "model", "dataset", "status", "accelerator", "param", "range"];

/** The run table's filters ({key: text}) and sort as the API's saved filters. */
function toSaved(filters, sort) {
  const saved = { sort, q: filters.q || "" };
  for (const key of LISTS) {
    const values = [].concat(filters[key] ?? []).filter((value) => value !== "");
    if (values.length) saved[key] = values.map((value) => (key === "experiment_id" ? Number(value) : value));
  }
  return saved;
}

/** A saved filter as the run table's filters (lists stay lists: the query repeats the key). */
function fromSaved(saved) {
  const filters = {};
  for (const key of LISTS) {
    const values = saved[key] || [];
    if (values.length) filters[key] = values.length === 1 ? String(values[0]) : values.map(String);
  }
  if (saved.q) filters.q = saved.q;
  if (saved.is_baseline !== null && saved.is_baseline !== undefined) filters.is_baseline = saved.is_baseline;
  return filters;
}

function isSavedFilter(dashboard) {
  const { run_ids: pinned = [], texts = [], filters = {} } = dashboard.config;
  const filtering = LISTS.some((key) => (filters[key] || []).length) || Boolean(filters.q) || (filters.is_baseline ?? null) !== null;
  return !pinned.length && !texts.length && filtering;
}

/** The controls, in `box`: `current()` gives the table's {filters, sort}, `apply(filters, sort)`
 * shows a saved one. */
export async function savedFilters(box, { current, apply }) {
  const select = el("select", { id: "saved-filter", name: "saved-filter" });
  const status = el("span", { class: "muted", role: "status", "aria-live": "polite" });
  const name = el("input", { id: "saved-filter-name", name: "saved-filter-name", maxlength: "200", placeholder: "e.g. MERCURY on edge" });
  const applyButton = el("button", { type: "button", text: "Apply" });
  const deleteBox = el("span");
  let saved = [];

  const chosen = () => saved.find((d) => d.id === select.value) || null;
  const showChoice = () => {
    const dashboard = chosen();
    applyButton.disabled = !dashboard;
    deleteBox.replaceChildren(dashboard && dashboard.can_manage ? confirmButton({
      label: "Delete", ariaLabel: `delete saved filter ${dashboard.name}`,
      question: `Delete the saved filter “${dashboard.name}” (its dashboard too)?`, confirmLabel: "Yes, delete",
      action: async () => {
        try {
          await del(`${API}/dashboards/${encodeURIComponent(dashboard.id)}`);
          await reload();
          status.textContent = `Deleted “${dashboard.name}”.`;
        } catch (error) {
          status.textContent = `Not deleted: ${describe(error)}`;
        }
      },
    }) : "");
  };
  const reload = async (selected = "") => {
    saved = (await getJson(`${API}/dashboards`)).filter(isSavedFilter);
    select.replaceChildren(el("option", { value: "", text: saved.length ? "choose…" : "none saved yet" }),
      ...saved.map((d) => el("option", { value: d.id, text: d.name, selected: d.id === selected })));
    showChoice();
  };

  select.addEventListener("change", showChoice);
  applyButton.addEventListener("click", () => {
    const dashboard = chosen();
    if (!dashboard) return;
    const filters = dashboard.config.filters || {};
    apply(fromSaved(filters), filters.sort || "-id");
    status.textContent = `Applied “${dashboard.name}”.`;
  });
  const save = async (event) => {
    event.preventDefault();
    const { filters, sort } = current();
    if (!name.value.trim()) {
      status.textContent = "Give the filters a name to save them.";
      return;
    }
    if (!Object.keys(filters).length) {
      status.textContent = "Set a filter first: with none, every run matches.";
      return;
    }
    try {
      const created = await postJson(`${API}/dashboards`, { name: name.value.trim(), config: { filters: toSaved(filters, sort) } });
      name.value = "";
      await reload(created.id);
      status.textContent = `Saved “${created.name}”.`;
    } catch (error) {
      status.textContent = `Not saved: ${describe(error)}`;
    }
  };
  box.replaceChildren(el("form", { class: "row saved-filters", "aria-label": "save and apply filters", onsubmit: save },
    el("label", { for: "saved-filter", text: "Saved filters" }), select, applyButton, deleteBox,
    el("span", { class: "grow" }),
    el("label", { for: "saved-filter-name", text: "Save these filters as" }), name,
    el("button", { type: "submit", text: "Save filters" }), status));
  try {
    await reload();
  } catch (error) {
    status.textContent = `Saved filters unavailable: ${describe(error)}`;
  }
}

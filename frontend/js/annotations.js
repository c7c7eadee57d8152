// Tags and notes of an experiment or a run: shown, and editable by those who may change it.

import { describe, patchJson } from "./api.js";
import { el } from "./format.js";

export function tagChips(tags) {
  return el("span", { class: "tags" }, (tags || []).map((tag) => el("span", { class: "tag", text: tag })));
}

/** A small form: tags (comma-separated) and notes, saved with PATCH `path`. */
export function annotationsEditor(container, { path, tags, notes, what }) {
  const tagsInput = el("input", { id: "annotation-tags", type: "text", value: (tags || []).join(", "), placeholder: "e.g. figure-3, keep" });
  const notesInput = el("textarea", { id: "annotation-notes", rows: "3", placeholder: `what to remember about this ${what}` });
  notesInput.value = notes || "";
  const status = el("span", { class: "muted", role: "status" });
  const error = el("div", { class: "error", role: "alert" });
  const save = el("button", { type: "submit", text: "Save tags and notes" });
  const form = el("form", { class: "annotations", "aria-label": `tags and notes of this ${what}` },
    el("div", { class: "field" }, el("label", { for: "annotation-tags", text: "Tags" }), tagsInput),
    el("div", { class: "field notes" }, el("label", { for: "annotation-notes", text: "Notes" }), notesInput),
    el("div", { class: "row" }, save, status), error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    save.disabled = true;
    error.textContent = "";
    status.textContent = "saving…";
    try {
      const body = { tags: tagsInput.value.split(",").map((t) => t.trim()).filter(Boolean), notes: notesInput.value };
      const saved = await patchJson(path, body);
      tagsInput.value = saved.tags.join(", ");
      status.textContent = "saved";
    } catch (failure) {
      status.textContent = "";
      error.textContent = describe(failure);
    } finally {
      save.disabled = false;
    }
  });
  container.replaceChildren(form);
}

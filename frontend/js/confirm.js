// A button for an action that cannot be undone: the first click asks, in place, and only
// "Yes, …" acts; "Keep" puts the button back.

import { el } from "./format.js";

/** A span holding the button; `action` runs after confirmation (its errors are the caller's).
 * `danger: false` for an action that destroys nothing (it is still asked, not undone). */
export function confirmButton({ label, question, confirmLabel, ariaLabel, action, hidden = false, danger = true }) {
  const box = el("span", { class: "confirm", hidden });
  const kind = danger ? "danger" : undefined;
  const ask = el("button", { type: "button", class: kind, text: label, "aria-label": ariaLabel || label });
  const reset = () => box.replaceChildren(ask);
  ask.addEventListener("click", () => {
    const yes = el("button", { type: "button", class: kind, text: confirmLabel, onclick: async () => {
      yes.disabled = true;
      try { await action(); } finally { reset(); }
    } });
    box.replaceChildren(el("span", { class: "question", text: `${question} ` }), yes, " ",
      el("button", { type: "button", text: "Keep", onclick: reset }));
    yes.focus();
  });
  reset();
  return box;
}

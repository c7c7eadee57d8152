// Editing a dashboard's text blocks: Markdown, each placed before one of the charts or at the end.

import { el } from "./format.js";
import { chartById } from "./charts/registry.js";

/** Edit `texts` (an array of {position, markdown}) in place inside the <details> `container`. */
export function textEditor(container, texts, charts) {
  const list = el("div", { class: "text-list" });
  const positionOptions = (selected) => [
    ...charts().map((id, index) => el("option", { value: String(index), selected: index === selected, text: `before “${chartById(id)?.title || id}”` })),
    el("option", { value: String(charts().length), selected: selected >= charts().length, text: "after the last chart" }),
  ];
  const render = () => {
    list.replaceChildren(...texts.map((block, index) => {
      const area = el("textarea", { rows: "4", "aria-label": `text block ${index + 1}`, oninput: (e) => { block.markdown = e.target.value; } });
      area.value = block.markdown;
      const where = el("select", { "aria-label": `place of text block ${index + 1}`, onchange: (e) => { block.position = Number(e.target.value); } }, positionOptions(block.position));
      return el("div", { class: "text-item" }, area, el("div", { class: "row" }, where,
        el("button", { type: "button", class: "danger", text: "Remove", onclick: () => { texts.splice(index, 1); render(); } })));
    }));
  };
  container.append(list, el("button", { type: "button", text: "Add text block", onclick: () => { texts.push({ position: 0, markdown: "" }); render(); } }));
  if (texts.length) container.open = true;
  render();
}

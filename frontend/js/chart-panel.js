// Draw charts into cards, each with PNG and SVG download buttons; mark each card when it rendered.

import { el } from "./format.js";
import { chartById } from "./charts/registry.js";

const PLOT_CONFIG = { displaylogo: false, responsive: true, toImageButtonOptions: { format: "png", scale: 2 } };

function downloadButton(plot, format, filename) {
  return el("button", {
    type: "button",
    "aria-label": `download ${filename} as ${format.toUpperCase()}`,
    onclick: () => window.Plotly.downloadImage(plot, { format, filename, width: 1200, height: 700 }),
    text: format.toUpperCase(),
  });
}

async function drawOne(container, chart, runs) {
  const plot = el("div", { class: "plot", role: "img", "aria-label": chart.title });
  const card = el(
    "article",
    { class: "chart-card", dataset: { chart: chart.id } },
    el("header", {}, el("h3", { text: chart.title }),
      el("span", {}, downloadButton(plot, "png", `orrery-${chart.id}`), " ", downloadButton(plot, "svg", `orrery-${chart.id}`))),
    plot,
  );
  container.append(card);
  const figure = chart.build(runs);
  await window.Plotly.newPlot(plot, figure.data, figure.layout, PLOT_CONFIG);
  card.dataset.rendered = "true";
}

/** Replace the container's charts with the chosen ones; resolves when all have rendered. */
export async function drawCharts(container, chartIds, runs) {
  container.replaceChildren();
  for (const id of chartIds) {
    const chart = chartById(id);
    if (chart) await drawOne(container, chart, runs);
  }
  container.dataset.rendered = String(chartIds.length);
}

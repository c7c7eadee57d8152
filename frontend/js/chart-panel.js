// Draw charts into cards, each with PNG and SVG download buttons; mark each card when it rendered.

import { el } from "./format.js";
import { chartById } from "./charts/registry.js";
import { loadFigures } from "./figures.js";
import { loadTechniques } from "./techniques.js";

const PLOT_CONFIG = { displaylogo: false, responsive: true, toImageButtonOptions: { format: "png", scale: 2 } };

function downloadButton(plot, format, filename) {
  return el("button", {
    type: "button",
    "aria-label": `download ${filename} as ${format.toUpperCase()}`,
    onclick: () => window.Plotly.downloadImage(plot, { format, filename, width: 1200, height: 700 }),
    text: format.toUpperCase(),
  });
}

async function drawOne(container, chart, runs, context) {
  const plot = el("div", { class: "plot", role: "img", "aria-label": chart.title });
  const card = el(
    "article",
    { class: chart.wide ? "chart-card wide" : "chart-card", dataset: { chart: chart.id } },
    el("header", {}, el("h3", { text: chart.title }),
      el("span", {}, downloadButton(plot, "png", `orrery-${chart.id}`), " ", downloadButton(plot, "svg", `orrery-${chart.id}`))),
    plot,
  );
  container.append(card);
  const figure = chart.build(runs, context);
  // A chart that grows with its runs (one bar per run) says how tall it needs to be.
  if (figure.layout.height) plot.style.height = `${figure.layout.height}px`;
  await window.Plotly.newPlot(plot, figure.data, figure.layout, PLOT_CONFIG);
  card.dataset.rendered = "true";
}

/** Draw one chart of the container again with these runs (e.g. the training curves of runs
 * still training); false when the container does not show it. */
export async function redrawChart(container, id, runs) {
  const plot = container.querySelector(`.chart-card[data-chart="${id}"] .plot`);
  if (!plot) return false;
  const figure = chartById(id).build(runs);
  await window.Plotly.react(plot, figure.data, figure.layout, PLOT_CONFIG);
  return true;
}

/** A dashboard's text block: HTML the server rendered from Markdown (raw HTML escaped). */
function textBlock(html) {
  const block = el("section", { class: "text-block" });
  block.innerHTML = html;
  return block;
}

/** Replace the container's charts with the chosen ones, text blocks before the chart at their
 * position (the rest after the last); resolves when all charts have rendered. `designPoints`:
 * the runs' design points (chart-data's), for the charts that plot them. */
export async function drawCharts(container, chartIds, runs, texts = [], designPoints = []) {
  // The colours need the techniques, the training curves the figures: charts draw without.
  await Promise.all([loadTechniques().catch(() => null), loadFigures().catch(() => null)]);
  container.replaceChildren();
  const textsAt = (index) => texts.filter((t) => t.position === index || (index === chartIds.length && t.position > index));
  for (const [index, id] of chartIds.entries()) {
    for (const text of textsAt(index)) container.append(textBlock(text.html));
    const chart = chartById(id);
    if (chart) await drawOne(container, chart, runs, { designPoints });
  }
  for (const text of textsAt(chartIds.length)) container.append(textBlock(text.html));
  container.dataset.rendered = String(chartIds.length);
}

// Training curves per epoch: loss, accuracy, and a panel for each figure the server declares
// (densities, MERCURY's hit rate, ADA-GP's GP fraction, ...) that one of the shown runs measured.

import { epochFigures } from "../figures.js";
import { runLabel } from "../format.js";
import { baseLayout, colorAt, emptyFigure, techniqueColor } from "./common.js";

const ALWAYS = [
  { title: "loss", series: [["train_loss", "train"], ["test_loss", "test"]] },
  { title: "accuracy (%)", series: [["train_accuracy", "train"], ["test_accuracy", "test"]], percent: true },
];

const measured = (runs, key) => runs.some((run) => run.epochs.some((e) => e[key] !== null && e[key] !== undefined));

/** Loss and accuracy, then one panel per declared figure with something to show. */
function panels(runs) {
  const figures = epochFigures()
    .filter((figure) => measured(runs, figure.key))
    .map((figure) => ({ title: figure.percent ? `${figure.label} (%)` : figure.label, series: [[figure.key, ""]], percent: figure.percent }));
  return [...ALWAYS, ...figures];
}
const COLUMNS = 3;
const LEGEND_PER_RUN = 8; // beyond this many trainings the legend names techniques, not runs
const EPOCH_TICKS = 6; // at most, per panel: a third of the card's width holds about six labels
// Legend entries that say what the line styles mean (drawn nowhere: no points).
const LINE_STYLES = [["solid", "train (solid)"], ["dot", "test (dotted)"]].map(([dash, name]) => ({
  type: "scatter", mode: "lines", x: [null], y: [null], name, legendgroup: "line styles", hoverinfo: "skip",
  line: { color: "#666", dash, width: 2 },
}));

/** One run per training: runs that share a training share its curves. */
function trainings(runs) {
  const seen = new Map();
  for (const run of runs) {
    if (!run.epochs || !run.epochs.length) continue;
    const key = run.training_id ?? `run-${run.id}`;
    if (!seen.has(key)) seen.set(key, run);
  }
  return [...seen.values()];
}

function axisDomains(index, count) {
  const rows = Math.ceil(count / COLUMNS);
  const col = index % COLUMNS;
  const row = Math.floor(index / COLUMNS);
  const width = 1 / COLUMNS;
  const height = 1 / rows;
  return {
    x: [col * width + 0.04, (col + 1) * width - 0.03],
    y: [1 - (row + 1) * height + 0.1, 1 - row * height - 0.06],
  };
}

export default {
  id: "curves",
  title: "Training curves per epoch",
  build(runs) {
    const shown = trainings(runs);
    if (!shown.length) return emptyFigure("no epochs recorded yet");
    const data = [];
    const layout = baseLayout({ margin: { l: 45, r: 10, t: 30, b: 40 }, showlegend: true, annotations: [] });
    const perRun = shown.length <= LEGEND_PER_RUN;
    const inLegend = new Set();
    const shownPanels = panels(shown);
    const lastEpoch = Math.max(...shown.flatMap((run) => run.epochs.map((e) => e.epoch)));
    const epochStep = Math.max(1, Math.ceil(lastEpoch / EPOCH_TICKS));
    shownPanels.forEach((panel, index) => {
      const suffix = index === 0 ? "" : String(index + 1);
      const domains = axisDomains(index, shownPanels.length);
      const bottomRow = Math.floor(index / COLUMNS) === Math.ceil(shownPanels.length / COLUMNS) - 1;
      layout[`xaxis${suffix}`] = {
        domain: domains.x, anchor: `y${suffix}`, tick0: 1, dtick: epochStep,
        title: bottomRow ? { text: "epoch", standoff: 4 } : undefined,
      };
      layout[`yaxis${suffix}`] = { domain: domains.y, anchor: `x${suffix}` };
      layout.annotations.push({
        text: `<b>${panel.title}</b>`, showarrow: false, xref: "paper", yref: "paper",
        x: (domains.x[0] + domains.x[1]) / 2, y: domains.y[1] + 0.02, xanchor: "center", yanchor: "bottom",
      });
      shown.forEach((run, runIndex) => {
        panel.series.forEach(([key, label], seriesIndex) => {
          const points = run.epochs.filter((e) => e[key] !== null && e[key] !== undefined);
          if (!points.length) return;
          // Few runs: a colour and a legend entry each. Many: a colour per technique.
          const name = perRun ? `#${run.id} ${run.technique}` : run.technique;
          const first = !inLegend.has(name);
          inLegend.add(name);
          data.push({
            type: "scatter", mode: "lines+markers", xaxis: `x${suffix}`, yaxis: `y${suffix}`,
            name, legendgroup: name, showlegend: first && seriesIndex === 0,
            x: points.map((e) => e.epoch), y: points.map((e) => (panel.percent ? 100 * e[key] : e[key])),
            line: { color: perRun ? colorAt(runIndex) : techniqueColor(run.technique), dash: seriesIndex ? "dot" : "solid", width: perRun ? 2 : 1 },
            hovertemplate: `${runLabel(run)}<br>${panel.title}${label ? ` (${label})` : ""}<br>epoch %{x}: %{y:.4g}<extra></extra>`,
          });
        });
      });
    });
    layout.legend = { orientation: "v", x: 0.7, y: 0.4, xanchor: "left", yanchor: "top" };
    return { data: [...data, ...LINE_STYLES], layout };
  },
};

// Roofline: achieved ops/s against operational intensity (ops per DRAM byte), under each array's roof.

import { acceleratorLabel, formatValue } from "../format.js";
import { baseLayout, colorAt, emptyFigure, finished, groupBy, hoverText, techniqueColor } from "./common.js";

/** Peak ops/s (2 ops per MAC per PE per cycle) and DRAM bytes/s of one accelerator. */
export function roofOf(accelerator) {
  const hz = accelerator.clock_mhz * 1e6;
  return {
    peak: 2 * accelerator.rows * accelerator.cols * hz,
    bandwidth: accelerator.dram_bandwidth * accelerator.word_bytes * hz,
  };
}

/** A run's point: its ops per DRAM byte, and its ops over its simulated time (`seconds`, the
 * simulator's total cycles / clock). */
export function pointOf(run) {
  const ops = 2 * (run.macs_actual ?? 0);
  return { intensity: ops / run.dram_bytes, performance: ops / run.seconds };
}

const ROOFS_IN_LEGEND = 6; // beyond this many accelerators, roofs are named in their hovers only

export default {
  id: "roofline",
  title: "Roofline: ops and DRAM bytes against the array's peak",
  wide: true,
  build(runs) {
    const shown = finished(runs).filter((r) => r.seconds && r.dram_bytes && r.macs_actual && r.accelerator && r.accelerator.clock_mhz);
    if (!shown.length) return emptyFigure("no finished runs with a simulated time and DRAM traffic");
    const points = shown.map((run) => ({ run, ...pointOf(run) }));
    const intensities = points.map((p) => p.intensity);
    const lo = Math.min(...intensities) / 10;
    const hi = Math.max(...intensities) * 10;
    const data = [];
    // One roof per distinct accelerator (sampled designs share a name, not a roof).
    const roofs = [...groupBy(shown, acceleratorLabel)];
    const named = roofs.length <= ROOFS_IN_LEGEND;
    roofs.forEach(([name, group], index) => {
      const { peak, bandwidth } = roofOf(group[0].accelerator);
      const ridge = peak / bandwidth;
      const xs = [lo, Math.min(Math.max(ridge, lo), hi), hi];
      data.push({
        type: "scatter", mode: "lines", name: named ? `roof: ${name}` : `roofs of ${roofs.length} accelerators (hover a roof)`,
        legendgroup: "roofs", showlegend: named || index === 0,
        x: xs, y: xs.map((x) => Math.min(peak, bandwidth * x)),
        line: { color: named ? colorAt(index + 6) : "#b8bec8", width: named ? 2 : 1 },
        hovertemplate: `${name}<br>peak %{y:.3s}ops/s<br>ridge at ${formatValue(ridge)} ops/byte<extra></extra>`,
      });
    });
    for (const [technique, group] of groupBy(points, (p) => p.run.technique)) {
      data.push({
        type: "scatter", mode: "markers", name: technique,
        x: group.map((p) => p.intensity), y: group.map((p) => p.performance),
        text: group.map((p) => hoverText(p.run, [
          `intensity: ${formatValue(p.intensity)} ops/byte`,
          `achieved: ${formatValue(p.performance / 1e9)} Gops/s`,
          `of peak: ${formatValue(p.performance / roofOf(p.run.accelerator).peak, "%")}`,
        ])),
        hovertemplate: "%{text}<extra></extra>",
        marker: { size: 10, color: techniqueColor(technique), line: { width: 1, color: "#fff" } },
      });
    }
    return {
      data,
      layout: baseLayout({
        // Decades with 2 and 5 between: every digit would crowd a few decades' labels.
        xaxis: { type: "log", dtick: "D2", title: { text: "operational intensity (ops / DRAM byte)" } },
        yaxis: { type: "log", dtick: "D2", title: { text: "achieved ops / s" } },
        legend: { orientation: "v", x: 1.02, y: 1, xanchor: "left" },
        margin: { l: 60, r: 20, t: 30, b: 50 },
      }),
    };
  },
};

// Every chart the dashboard knows, in display order; ids match the API's chart names.

import curves from "./curves.js";
import cycles from "./cycles.js";
import energy from "./energy.js";
import layerCycles from "./layer-cycles.js";
import macs from "./macs.js";
import parallel from "./parallel.js";
import pareto from "./pareto.js";
import roofline from "./roofline.js";

export const CHARTS = [pareto, cycles, energy, layerCycles, macs, curves, parallel, roofline];
export const CHART_IDS = CHARTS.map((chart) => chart.id);
export const chartById = (id) => CHARTS.find((chart) => chart.id === id);

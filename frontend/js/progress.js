// A progress bar with its figures in words: the epoch in progress of N, the per cent done and
// the time left as the server estimates it (backend/experiments/progress.py).

import { el } from "./format.js";

/** A time span as people say it: "45 s", "3 min 20 s", "1 h 5 min". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
  const total = Math.max(0, Math.round(seconds));
  const [h, m, s] = [Math.floor(total / 3600), Math.floor((total % 3600) / 60), total % 60];
  if (h) return m ? `${h} h ${m} min` : `${h} h`;
  if (m) return s ? `${m} min ${s} s` : `${m} min`;
  return `${s} s`;
}

/** "epoch 2/3 · 47% · about 1 min 20 s left" from {fraction, epoch, epochs, seconds_left}
 * (epoch: epochs measured so far; any of them may be missing). */
export function progressText({ fraction, epoch, epochs, seconds_left: left }) {
  const parts = [];
  if (epochs) parts.push(`epoch ${Math.min((epoch ?? 0) + 1, epochs)}/${epochs}`);
  parts.push(`${Math.floor(100 * (fraction || 0))}%`);
  if (left !== null && left !== undefined) parts.push(`about ${fmtDuration(left)} left`);
  else if (left === null && (fraction || 0) < 1) parts.push("time left after epoch 1");
  return parts.join(" · ");
}

/** The bar and its text, e.g. for a run: progressBar(run.live, `run ${run.id} progress`). */
export function progressBar(state, label) {
  const text = progressText(state);
  return el("span", { class: "progress-box" },
    el("progress", { max: "1", value: String(state.fraction || 0), "aria-label": label, title: text }),
    " ", el("span", { class: "progress-text muted", text }));
}

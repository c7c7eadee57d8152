// A banner above the page when no worker has sent a heartbeat within the lease: submitted runs
// then wait in the queue. Liveness comes from the heartbeats workers record in the database.

import { API } from "./api.js";
import { el } from "./format.js";

const CHECK_EVERY_MS = 15_000;

function banner() {
  let box = document.getElementById("worker-banner");
  if (!box) {
    box = el("div", { id: "worker-banner", class: "banner", role: "status", hidden: true });
    document.querySelector("main").prepend(box);
  }
  return box;
}

function ago(timestamp) {
  if (!timestamp) return "never";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(timestamp)) / 1000));
  return seconds < 120 ? `${seconds} s ago` : `${Math.round(seconds / 60)} min ago`;
}

export async function checkWorkers() {
  const box = banner();
  let health;
  try {
    const response = await fetch(`${API}/health`, { headers: { Accept: "application/json" } });
    health = await response.json();
  } catch {
    return; // offline: the page's own calls will say so
  }
  const workers = health.workers;
  if (!workers || workers.ok) {
    box.hidden = true;
    return;
  }
  box.replaceChildren(
    el("b", { text: "No worker is running. " }),
    `None has sent a heartbeat within the last ${workers.lease_seconds} s` +
      // Signed-out callers are not told when the last one beat (live is null for them).
      (workers.live === null ? ". " : ` (last one: ${ago(workers.last_beat_at)}). `),
    "Submitted runs wait in the queue until a worker starts (",
    el("code", { text: "orrery worker" }),
    ").",
  );
  box.hidden = false;
}

checkWorkers();
setInterval(checkWorkers, CHECK_EVERY_MS);

// The page header's session corner: who is logged in and a "Log out" button, or a note that the
// server runs single-user. Without a session, the page sends the user to /login.

import { API, loginUrl, redirectToLogin, setCsrfToken } from "./api.js";

function corner() {
  const header = document.querySelector("header.top");
  let box = header.querySelector(".session");
  if (!box) {
    box = document.createElement("div");
    box.className = "session";
    box.setAttribute("aria-label", "session");
    box.setAttribute("role", "group");
    header.append(box);
  }
  return box;
}

async function logOut(button, csrf) {
  button.disabled = true;
  try {
    const response = await fetch(`${API}/auth/logout`, {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", ...(csrf ? { "X-CSRF-Token": csrf } : {}) },
    });
    if (!response.ok && response.status !== 401) throw new Error(`HTTP ${response.status}`);
    location.assign(loginUrl(null));
  } catch (error) {
    button.disabled = false;
    button.title = `could not log out: ${error.message || error}`;
  }
}

function render(box, me) {
  box.replaceChildren();
  if (me.mode === "single-user") {
    const note = document.createElement("span");
    note.className = "session-user muted";
    note.textContent = "single-user mode (no login)";
    box.append(note);
    return;
  }
  const who = document.createElement("span");
  who.className = "session-user";
  who.textContent = me.display_name && me.display_name !== me.email ? `${me.display_name} (${me.email})` : me.email;
  who.title = "logged in";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "logout";
  button.textContent = "Log out";
  button.addEventListener("click", () => logOut(button, me.csrf_token));
  box.append("Logged in as ", who, button);
}

export async function showSession() {
  const box = corner();
  let response;
  try {
    response = await fetch(`${API}/auth/me`, { credentials: "same-origin", headers: { Accept: "application/json" } });
  } catch {
    return; // offline: the page's own calls will say so
  }
  if (response.status === 401) {
    redirectToLogin();
    return;
  }
  if (!response.ok) return;
  const me = await response.json();
  setCsrfToken(me.csrf_token || null);
  render(box, me);
}

showSession();

// The login page: email and password to a browser session, then back to `next` (same-site only).

import { API, safeNext } from "../api.js";

const form = document.getElementById("login-form");
const message = document.getElementById("login-message");
const submit = document.getElementById("login-submit");
const next = safeNext(new URLSearchParams(location.search).get("next") || "/");

function show(text) {
  message.textContent = text;
}

/** "in 15 minutes (at 14:05)" from a Retry-After header (seconds or an HTTP date). */
function retryText(header) {
  let seconds = Number(header);
  if (!Number.isFinite(seconds)) {
    const when = Date.parse(header || "");
    seconds = Number.isFinite(when) ? Math.max(0, (when - Date.now()) / 1000) : NaN;
  }
  if (!Number.isFinite(seconds)) return "later";
  const at = new Date(Date.now() + seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const span = seconds < 90 ? `${Math.ceil(seconds)} seconds` : `${Math.ceil(seconds / 60)} minutes`;
  return `in ${span} (at ${at})`;
}

async function detail(response) {
  try {
    const data = await response.json();
    return typeof data.detail === "string" ? data.detail : "";
  } catch {
    return "";
  }
}

async function logIn(event) {
  event.preventDefault();
  const email = form.email.value.trim();
  const password = form.password.value;
  if (!email || !password) {
    show("Enter your email and password.");
    (email ? form.password : form.email).focus();
    return;
  }
  show("");
  submit.disabled = true;
  form.setAttribute("aria-busy", "true");
  try {
    const response = await fetch(`${API}/auth/login`, {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify({ email, password }),
    });
    if (response.ok) {
      location.assign(next);
      return;
    }
    if (response.status === 401) {
      show("Wrong email or password.");
      form.password.value = "";
      form.password.focus();
    } else if (response.status === 429) {
      show(`Too many failed logins. Try again ${retryText(response.headers.get("Retry-After"))}.`);
    } else if (response.status === 422) {
      show("Enter a valid email and password.");
    } else {
      show(`Could not log in: ${(await detail(response)) || `HTTP ${response.status}`}.`);
    }
  } catch (error) {
    show(`Could not reach the server: ${error.message || error}.`);
  } finally {
    submit.disabled = false;
    form.removeAttribute("aria-busy");
  }
}

/** Already logged in (or a single-user server, where nobody logs in): straight on to `next`. */
async function skipIfLoggedIn() {
  try {
    const response = await fetch(`${API}/auth/me`, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.ok) location.replace(next);
  } catch {
    // the form is still there
  }
}

form.addEventListener("submit", logIn);
skipIfLoggedIn();

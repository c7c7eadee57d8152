// Talking to the REST API: JSON in and out, errors as ApiError with the server's field messages.

export const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : `HTTP ${status}`);
    this.status = status;
    this.detail = detail;
  }

  /** [{loc: [...], msg}] for a 422 from pydantic or the API, else []. */
  get fieldErrors() {
    return Array.isArray(this.detail) ? this.detail : [];
  }
}

let csrfToken = null;

/** The CSRF token of this page's session, once known (the header reads it from /auth/me). */
export function setCsrfToken(token) {
  csrfToken = token || null;
}

/** `next` as a same-site relative path (path, query, hash), else "/": never an open redirect. */
export function safeNext(raw) {
  if (typeof raw !== "string" || !raw.startsWith("/") || raw.startsWith("//")) return "/";
  if (/[\\\u0000-\u001f\u007f]/.test(raw)) return "/"; // browsers read a backslash as "/"
  let url;
  try {
    url = new URL(raw, location.origin);
  } catch {
    return "/";
  }
  if (url.origin !== location.origin || url.pathname === "/login") return "/";
  return `${url.pathname}${url.search}${url.hash}`;
}

/** The login page's address, coming back to `next` (a same-site path) afterwards. */
export function loginUrl(next) {
  return next ? `/login?next=${encodeURIComponent(safeNext(next))}` : "/login";
}

/** Without a session (401), go log in and come back here; not from the login or shared pages. */
export function redirectToLogin() {
  const page = document.body ? document.body.dataset.page : "";
  if (page === "login" || page === "shared") return false;
  location.replace(loginUrl(`${location.pathname}${location.search}${location.hash}`));
  return true;
}

/** With login sessions, unsafe requests echo the session's CSRF token (read from /auth/me). */
async function fetchCsrfToken() {
  const response = await fetch(`${API}/auth/me`, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const me = response.ok ? await response.json() : {};
  return me && me.csrf_token ? me.csrf_token : null;
}

async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  if (csrfToken && method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return fetch(path.startsWith("/") ? path : `${API}/${path}`, init);
}

export async function request(method, path, body) {
  let response = await send(method, path, body);
  if (response.status === 403 && method !== "GET") {
    // No token yet, or a stale one (logged in again elsewhere): fetch it and retry once.
    const text = await response.clone().text();
    const used = csrfToken;
    if (/csrf/i.test(text) && (csrfToken = await fetchCsrfToken()) && csrfToken !== used) {
      response = await send(method, path, body);
    }
  }
  // Not logged in: off to the login page; the caller waits for the navigation, not an error.
  if (response.status === 401 && redirectToLogin()) return new Promise(() => {});
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (!response.ok) throw new ApiError(response.status, data && data.detail !== undefined ? data.detail : text);
  return data;
}

export const getJson = (path) => request("GET", path);
export const postJson = (path, body) => request("POST", path, body ?? {});
export const patchJson = (path, body) => request("PATCH", path, body);
export const del = (path) => request("DELETE", path);

/** A query string from an object; arrays repeat the key, empty values are left out. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null && item !== "") search.append(key, String(item));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** A short readable message for any error thrown by request(). */
export function describe(error) {
  if (error instanceof ApiError) {
    if (error.fieldErrors.length) {
      return error.fieldErrors.map((e) => `${(e.loc || []).filter((p) => p !== "body").join(".")}: ${e.msg}`).join("; ");
    }
    return `${error.status}: ${typeof error.detail === "string" ? error.detail : JSON.stringify(error.detail)}`;
  }
  return String(error && error.message ? error.message : error);
}

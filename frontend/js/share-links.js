// A dashboard's read-only links: create (the token is shown once), list, revoke.

import { API, del, describe, getJson, postJson } from "./api.js";
import { el, formatWhen } from "./format.js";

export class ShareLinks {
  constructor(root, dashboardId, onError) {
    this.root = root;
    this.dashboardId = dashboardId;
    this.onError = onError;
    this.list = root.querySelector("#share-links");
    this.fresh = root.querySelector("#new-link");
    root.querySelector("#create-share-link").addEventListener("click", () => this.create());
  }

  base() {
    return `${API}/dashboards/${encodeURIComponent(this.dashboardId)}/share-links`;
  }

  async load() {
    const links = await getJson(this.base());
    this.list.replaceChildren(...links.map((link) => el("li", { dataset: { linkId: String(link.id) } },
      `link #${link.id}, created ${formatWhen(link.created_at)} `,
      link.revoked_at
        ? el("span", { class: "badge cancelled", text: "revoked" })
        : el("button", { type: "button", class: "danger", text: "Revoke", "aria-label": `revoke link ${link.id}`, onclick: () => this.revoke(link.id) }))));
  }

  async create() {
    try {
      const link = await postJson(this.base());
      const url = new URL(link.path, location.origin).href;
      const input = el("input", { class: "share-url", readonly: true, value: url, "aria-label": "share link", id: "share-url" });
      this.fresh.replaceChildren(
        el("p", { class: "hint", text: "Anyone with this link can view this dashboard read-only. It is shown only now." }),
        el("div", { class: "row" }, input,
          el("button", { type: "button", text: "Copy link", onclick: () => navigator.clipboard?.writeText(url) }),
          el("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: "Open" })));
      await this.load();
    } catch (error) {
      this.onError(describe(error));
    }
  }

  async revoke(id) {
    try {
      await del(`${this.base()}/${id}`);
      await this.load();
    } catch (error) {
      this.onError(describe(error));
    }
  }
}

// "Deleted workspaces": the exports of workspaces that no longer exist
// (GET v1/exports?gone=true), so their files can still be downloaded and
// restored once the workspace's row is gone. The section is hidden while
// there is none.

import { $, clear, el } from "./dom.js";
import { bytes, when } from "./format.js";

const pageSize = 50;
// A page may come back short, even empty, with a cursor (companion reads
// a bounded number of records per request); a load follows the cursor at
// most this many times before it waits for "Older exports".
const maxFollow = 10;

export class GoneList {
  /**
   * @param {Object} o
   * @param {import("./api.js").Api} o.api
   * @param {<T>(f: () => Promise<T>) => Promise<T|undefined>} o.run calls f, showing its failure
   * @param {(x: any) => void} o.restore opens the restore dialog for an export
   */
  constructor(o) {
    Object.assign(this, o);
    this.section = $("gone");
    this.body = $("gone-table").tBodies[0];
    this.next = null; // next_before of the last page shown
    this.shown = 0;
    this.seq = 0; // drops the answer of a load started before the last
    this.timer = 0;
    this.names = new Map(); // workspace id → name, of the deleted workspaces seen (for the audit list)
    $("gone-more").addEventListener("click", () => this.load(true));
  }

  /**
   * load reads the list again from the newest (as many as were shown, so
   * a refresh keeps older pages in sight), or with more the next page.
   */
  async load(more = false) {
    const seq = ++this.seq;
    const limit = more ? pageSize : Math.min(Math.max(this.shown, pageSize), 500);
    let before = more ? this.next : null;
    const got = [];
    for (let i = 0; i < maxFollow; i++) {
      const q = `gone=true&limit=${limit}` + (before ? `&before=${encodeURIComponent(before)}` : "");
      const data = await this.run(() => this.api.call("GET", `v1/exports?${q}`));
      if (!data || seq !== this.seq) return;
      got.push(...(data.exports || []));
      before = data.next_before ?? null;
      if (got.length || !before) break;
    }
    if (!more) {
      clear(this.body);
      this.shown = 0;
    }
    for (const x of got) {
      if (x.workspace_name) this.names.set(x.workspace_id, x.workspace_name);
      this.body.append(this.row(x));
    }
    this.shown += got.length;
    this.next = before;
    $("gone-more").hidden = !this.next;
    this.section.hidden = this.shown === 0 && !this.next;
  }

  /** refreshSoon reloads once changes settle (a burst of removals is one load). */
  refreshSoon() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(false), 300);
  }

  row(x) {
    const name = x.workspace_name || x.workspace_id;
    const files = el("td", { class: "files" });
    for (const f of x.files || []) {
      files.append(el("button", { type: "button", "data-file": f.name, "aria-label": `Download ${f.name} (${bytes(f.bytes)}) of ${name}`,
        onclick: () => this.run(() => this.api.download(f.url.replace(/^\//, ""), f.name)) }, f.name));
    }
    const actions = el("td", { class: "actions" });
    if (x.verified && x.restorable) {
      actions.append(el("button", { type: "button", "data-action": "restore", "aria-label": `Restore ${name} from its export of ${when(x.created_at)}`,
        onclick: () => this.restore(x) }, "Restore"));
    }
    return el("tr", { "data-export": x.id, "data-workspace": x.workspace_id },
      el("td", { class: "name" }, name, el("span", { class: "sub" }, x.workspace_id)),
      el("td", {}, x.provider || "—"),
      el("td", {}, when(x.created_at)),
      el("td", {}, bytes(x.bytes)),
      el("td", { "data-col": "state" }, x.state + (x.error ? ": " + x.error : "")),
      files, actions);
  }
}

// The restore dialog: an account picker, the server's preview of the
// restore (method, where the files go, what comes back and what cannot)
// shown BEFORE the person confirms, then the restore itself, followed on
// the stream until the new workspace runs or fails. Both export lists (a
// workspace's, and Deleted workspaces) open it.

import { $, clear, el } from "./dom.js";
import { bytes, when } from "./format.js";

/** message is an error as the page shows it: the server's words and code. */
const message = (e) => `${e.message}${e.code ? ` (${e.code})` : ""}`;

export class RestoreDialog {
  /**
   * @param {Object} o
   * @param {import("./api.js").Api} o.api
   * @param {() => Iterable<any>} o.accounts the person's accounts
   * @param {(w: any) => void} o.started called with the new workspace once the restore began
   * @param {(id: string) => any} o.current the workspace as the stream last told it, if it did
   */
  constructor(o) {
    Object.assign(this, o);
    this.dialog = $("restore-dialog");
    this.x = null; // the export on screen
    this.plan = null; // the preview on screen, what Restore confirms
    this.seq = 0; // drops the answer of a preview asked before the last
    this.following = null; // the restored workspace's id, once started
    $("rd-account").addEventListener("change", () => this.preview());
    $("rd-cancel").addEventListener("click", () => this.dialog.close());
    $("rd-confirm").addEventListener("click", () => this.confirm());
    this.dialog.addEventListener("close", () => { this.x = null; this.plan = null; this.following = null; this.seq++; });
  }

  /** open shows the dialog for export x and asks for the preview with no account picked. */
  open(x) {
    this.x = x;
    this.plan = null;
    this.following = null;
    $("rd-name").textContent = x.workspace_name || x.workspace_id;
    $("rd-export").textContent = `Export ${x.id} of ${x.workspace_name || x.workspace_id}` +
      (x.provider ? ` (${x.provider})` : "") + `, made ${when(x.created_at)}, ${bytes(x.bytes)}.`;
    const sel = $("rd-account");
    clear(sel);
    sel.append(el("option", { value: "" }, "let companion choose"));
    for (const a of this.accounts()) sel.append(el("option", { value: a.id }, `${a.label || a.id} (${a.provider})`));
    sel.value = "";
    sel.disabled = false;
    $("rd-progress").hidden = true;
    $("rd-confirm").hidden = false;
    $("rd-cancel").textContent = "Cancel";
    this.dialog.showModal();
    sel.focus();
    this.preview();
  }

  /** preview asks how a restore into the picked account (or companion's choice) would go. */
  async preview() {
    if (!this.x) return;
    const seq = ++this.seq;
    const account = $("rd-account").value;
    this.plan = null;
    $("rd-confirm").disabled = true;
    $("rd-plan").hidden = true;
    $("rd-error").hidden = true;
    $("rd-status").textContent = "Asking companion how this restore would go…";
    const q = account ? `?account_id=${encodeURIComponent(account)}` : "";
    let r;
    try {
      r = await this.api.call("GET", `v1/exports/${encodeURIComponent(this.x.id)}/restore-preview${q}`);
    } catch (e) {
      if (seq !== this.seq) return;
      $("rd-status").textContent = account ? "This account cannot restore this export." : "Pick an account to restore into.";
      this.error(e);
      return;
    }
    if (seq !== this.seq) return;
    this.show(r.restore, account === "");
  }

  /** show puts a preview on screen and enables Restore. */
  show(p, chosen) {
    const acct = [...this.accounts()].find((a) => a.id === p.account_id);
    const name = acct ? acct.label || acct.id : p.account_id;
    $("rd-status").textContent = `Into account ${name} (${p.provider})${chosen ? ", chosen by companion" : ""}.`;
    $("rd-method").dataset.method = p.method;
    $("rd-method").textContent = p.method === "snapshot"
      ? "Method: snapshot. A new box is made from the export's snapshot of the box."
      : `Method: files. A new box is made and the export's files are put into ${p.dest || "its workspace"}` +
        (p.files ? ` (${p.files} files, ${bytes(p.bytes)})` : "") + " through its agent-server.";
    const list = (id, items) => { clear($(id)); for (const t of items || []) $(id).append(el("li", {}, String(t))); };
    list("rd-brings", p.brings_back);
    list("rd-cannot", p.cannot);
    $("rd-plan").hidden = false;
    this.plan = p;
    $("rd-confirm").disabled = false;
  }

  error(e) {
    $("rd-error").textContent = message(e);
    $("rd-error").hidden = false;
  }

  /**
   * confirm restores exactly what the preview on screen showed: its
   * account and method (companion's choice included), so that nothing
   * changed since can make the restore differ from what was confirmed.
   */
  async confirm() {
    const x = this.x, p = this.plan;
    if (!x || !p || this.following) return;
    $("rd-confirm").disabled = true;
    $("rd-account").disabled = true;
    $("rd-error").hidden = true;
    let r;
    try {
      r = await this.api.call("POST", `v1/exports/${encodeURIComponent(x.id)}/restore`, { account_id: p.account_id, method: p.method });
    } catch (e) {
      this.error(e);
      $("rd-account").disabled = false;
      $("rd-confirm").disabled = false;
      return;
    }
    const w = r.workspace;
    this.following = w.id;
    $("rd-confirm").hidden = true;
    $("rd-cancel").textContent = "Close";
    $("rd-progress").hidden = false;
    $("rd-progress").textContent = `Restore started: ${w.name} is being created.`;
    // The stream may have told of it before this answer came.
    this.workspaceChanged(this.current(w.id) || w);
    this.started(w);
    $("rd-cancel").focus();
  }

  /** workspaceChanged follows the restored workspace (stream upserts) until it runs or fails. */
  workspaceChanged(w) {
    if (!this.following || w.id !== this.following) return;
    const p = $("rd-progress");
    if (w.state === "creating") {
      if (w.progress) p.textContent = `Restoring ${w.name}: ${w.progress}`;
      return;
    }
    this.following = null;
    if (w.state === "error") {
      p.textContent = `The restore of ${w.name} failed.`;
      $("rd-error").textContent = w.error || "the restore did not finish";
      $("rd-error").hidden = false;
      return;
    }
    p.textContent = `Restored: ${w.name} is ${w.state}.`;
  }
}

// The conversations in one workspace's box, read through companion's
// agent proxy with the JS client: connect (which resumes a paused or
// stopped box and waits for its agent-server), then the agent-server's
// conversation search, most recently active first. The page's credential
// goes along as for every other call (the token, or the session cookie);
// companion adds the box's key.

import { $, clear, el } from "./dom.js";
import { when } from "./format.js";

const pageSize = 50;

export class ConversationsPanel {
  /**
   * @param {Object} o
   * @param {import("./client/companion.js").CompanionClient} o.client
   */
  constructor({ client }) {
    this.client = client;
    this.w = null; // the workspace shown
    this.next = null; // the next page's id
    this.seq = 0; // the latest load; an older one's answer is dropped
    this.busy = false;
    $("conv-refresh").addEventListener("click", () => this.w && this.load());
    $("conv-more").addEventListener("click", () => this.more());
    $("conv-close").addEventListener("click", () => this.close());
  }

  /** open shows workspace w's conversations, waking its box first when it sleeps. */
  open(w) {
    this.w = w;
    clear($("conv-table").tBodies[0]);
    $("conv-table").hidden = true;
    $("conversations").hidden = false;
    this.heading();
    this.load();
    $("conv-refresh").focus();
  }

  close() {
    this.w = null;
    this.seq++;
    $("conversations").hidden = true;
  }

  /** workspaceChanged follows the workspace on the stream while the panel is open. */
  workspaceChanged(w) {
    if (!this.w || w.id !== this.w.id) return;
    this.w = w;
    this.heading();
    if (this.busy && this.waking) this.status(`Waking the box… (${w.state}${w.progress ? ": " + w.progress : ""})`);
  }

  heading() {
    $("conv-of").textContent = `Conversations in ${this.w.name} (${this.w.state})`;
  }

  async load() {
    const my = ++this.seq;
    const w = this.w;
    const agent = this.client.agent(w.id);
    this.busy = true;
    this.waking = w.state !== "running";
    this.error("");
    $("conv-more").hidden = true;
    this.status(this.waking ? "Waking the box… (connecting resumes it, which counts as activity)" : "Connecting to the agent…");
    try {
      await agent.connect();
      if (my !== this.seq) return;
      this.waking = false;
      this.status("Reading conversations…");
      const page = await agent.conversations({ limit: pageSize, sortOrder: "UPDATED_AT_DESC" });
      if (my !== this.seq) return;
      clear($("conv-table").tBodies[0]);
      this.show(page);
    } catch (e) {
      if (my !== this.seq) return;
      this.status("");
      this.error(`${e.message}${e.code ? ` (${e.code})` : ""}. ${e.status === 409 ? "Try again once the workspace has settled." : "Refresh to try again."}`);
    } finally {
      if (my === this.seq) this.busy = false;
    }
  }

  async more() {
    if (!this.w || !this.next) return;
    const my = this.seq;
    try {
      const page = await this.client.agent(this.w.id).conversations({ limit: pageSize, sortOrder: "UPDATED_AT_DESC", pageId: this.next });
      if (my === this.seq) this.show(page);
    } catch (e) {
      if (my === this.seq) this.error(`${e.message}. Refresh to connect again.`);
    }
  }

  /** show appends a page of conversations. */
  show(page) {
    const body = $("conv-table").tBodies[0];
    for (const c of page.items || []) {
      body.append(el("tr", { "data-conversation": c.id },
        el("td", {}, c.title || "(untitled)", el("span", { class: "sub" }, c.id.slice(0, 8))),
        el("td", {}, el("span", { class: "badge", "data-status": c.execution_status }, c.execution_status)),
        el("td", { "data-col": "updated" }, when(c.updated_at)),
        el("td", {}, when(c.created_at))));
    }
    const n = body.rows.length;
    $("conv-table").hidden = n === 0;
    this.next = page.next_page_id || null;
    $("conv-more").hidden = !this.next;
    this.status(n === 0 ? "No conversations in this box yet: once an agent starts one, Refresh lists it." : `${n}${this.next ? "+" : ""} conversation${n === 1 ? "" : "s"}, most recently active first.`);
  }

  status(text) {
    $("conv-status").textContent = text;
  }

  error(text) {
    $("conv-error").textContent = text;
    $("conv-error").hidden = !text;
  }
}

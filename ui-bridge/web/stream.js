// The status stream: one WebSocket to /v1/ws, resumed with ?since= after
// a disconnect, with exponential backoff, and the server clock's offset
// taken from every message's server_time. Snapshots are asked for in
// table form and turned back into objects by the JS client's decoder.

import { snapshotWorkspaces } from "./client/companion.js";

const maxDelay = 30_000;

/** How long a connection attempt may go unanswered before it counts as failed. */
const handshakeTimeout = 30_000;

/**
 * @typedef {Object} StreamHandlers
 * @property {(msg: any, t0: number) => void} snapshot replace every workspace
 * @property {(msg: any, t0: number) => void} upsert insert or replace one workspace
 * @property {(msg: any) => void} remove drop one workspace
 * @property {(msg: any) => void} account one account changed
 * @property {(msg: any) => void} [notice] a notice (e.g. kind "retention_warning")
 * @property {(msg: any) => void} [agent] a workspace's open agent connections ({id, connections})
 * @property {(state: string, detail: string) => void} state connection state changed:
 *   "connecting", "live", "reconnecting", "signed-out"
 * @property {() => Promise<boolean>} signedIn whether the token (or cookie) is still accepted
 * @property {() => Promise<boolean>} [signedOut] the credential is gone: true when the page
 *   asks for a new sign-in (and connects again after it), false to keep retrying
 */

export class Stream {
  /**
   * @param {() => URL} url the stream URL without ?since
   * @param {() => string} token
   * @param {StreamHandlers} on
   * @param {{handshakeTimeoutMs?: number}} [options]
   */
  constructor(url, token, on, options = {}) {
    this.urlOf = url;
    this.token = token;
    this.on = on;
    /** the last revision applied; null before the first snapshot */
    this.rev = null;
    /** server clock minus local clock, in ms (see message) */
    this.offset = 0;
    this.failures = 0;
    this.ws = null;
    this.timer = 0;
    this.staleSince = null;
    this.handshakeTimeout = options.handshakeTimeoutMs ?? handshakeTimeout;
    this.handshakeTimer = 0;
  }

  /** now is the server's clock, estimated. */
  now() {
    return Date.now() + this.offset;
  }

  /** connect opens the stream now, dropping any pending retry. */
  connect() {
    clearTimeout(this.timer);
    clearTimeout(this.handshakeTimer);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
    }
    const u = this.urlOf();
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    if (this.rev !== null) u.searchParams.set("since", String(this.rev));
    u.searchParams.set("snapshot", "table");
    const protos = ["companion.v1"];
    const t = this.token();
    if (t) protos.push("companion.bearer." + t);
    this.on.state(this.failures ? "reconnecting" : "connecting", this.failures ? "reconnecting…" : "connecting…");
    let opened = false;
    const ws = new WebSocket(u, protos);
    this.ws = ws;
    this.offsetSeen = -Infinity;
    // A handshake nobody answers (a proxy holding it, a network that went
    // away mid-connect) would leave the page "connecting…" for good:
    // give up on it, which closes it and retries with the backoff.
    this.handshakeTimer = setTimeout(() => {
      if (!opened && this.ws === ws) ws.close();
    }, this.handshakeTimeout);
    ws.onopen = () => {
      opened = true;
      clearTimeout(this.handshakeTimer);
      this.openedAt = Date.now();
      this.staleSince = null;
      this.on.state("live", this.rev === null ? "live" : `live (resumed after rev ${this.rev})`);
    };
    ws.onmessage = (e) => this.message(e.data);
    ws.onclose = (e) => {
      clearTimeout(this.handshakeTimer);
      this.closed(opened, e);
    };
  }

  message(data) {
    const t0 = performance.now();
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      return; // not ours to interpret; the server sends only JSON
    }
    if (m.server_time) {
      // server_time is when the message was made (a shared snapshot may
      // be up to a second old), so each estimate is a lower bound: keep
      // the largest seen on this connection.
      const est = Date.parse(m.server_time) - Date.now();
      if (est > this.offsetSeen) {
        this.offsetSeen = est;
        this.offset = est;
      }
    }
    switch (m.type) {
      case "snapshot":
        performance.clearMarks("companion:parsed");
        performance.mark("companion:parsed"); // how much of it was JSON.parse (make bench)
        m.workspaces = snapshotWorkspaces(m) || [];
        this.rev = m.rev;
        this.failures = 0;
        this.on.snapshot(m, t0);
        break;
      case "upsert":
      case "remove":
        if (this.rev !== null && m.rev <= this.rev) return; // already applied
        this.rev = m.rev;
        this.failures = 0;
        if (m.type === "upsert") this.on.upsert(m, t0);
        else this.on.remove(m);
        break;
      case "account":
        this.on.account(m);
        break;
      case "notice": // no rev, not replayed: shown while the page is open
        if (this.on.notice) this.on.notice(m);
        break;
      case "agent": // no rev; re-sent on every connection for the counts above 0
        if (this.on.agent) this.on.agent(m);
        break;
      default: // unknown types are ignored (API.md)
    }
  }

  async closed(opened, e) {
    this.ws = null;
    if (this.staleSince === null) this.staleSince = new Date();
    // A connection that lasted a while was a success: start the backoff
    // over (one that closes at once keeps backing off).
    if (opened && Date.now() - this.openedAt > 10_000) this.failures = 0;
    this.failures++;
    const delay = Math.min(maxDelay, 500 * 2 ** Math.min(this.failures - 1, 6)) * (0.8 + 0.4 * Math.random());
    // 4011 (the user was removed) and 4012 (the session or token ended):
    // a reconnect with the same credential would be refused.
    const ended = e.code === 4011 || e.code === 4012;
    const signedOut = ended || (!opened && !(await this.on.signedIn()));
    if (this.ws !== null) return; // a newer connection was opened meanwhile (a new token)
    if (signedOut) {
      this.on.state("signed-out", ended ? e.reason || "signed out: the session has ended" : "signed out: companion does not accept this page's token (was it restarted?)");
      // The page may ask for a sign-in instead; it connects again after one.
      if (this.on.signedOut && (await this.on.signedOut())) return;
    } else {
      const why = e.code === 1001 ? "companion stopped" : e.code === 4008 ? "too slow" : "connection lost";
      this.on.state("reconnecting", `${why}; reconnecting in ${Math.ceil(delay / 1000)} s`);
    }
    this.timer = setTimeout(() => this.connect(), delay);
  }
}

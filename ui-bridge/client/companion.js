// companion.js: the JavaScript client of companion's HTTP and WebSocket API
// (ui-bridge/API.md). One ES module, no dependencies. It runs in browsers,
// in Electron's main and renderer processes and in Node 20+ (Node 20 needs
// --experimental-websocket for a global WebSocket; or pass one in).
//
//   import { CompanionClient } from "./companion.js";
//   const c = new CompanionClient({ baseUrl: ready.url, token: ready.token });
//   c.on("change", () => render(c.list()));
//   c.connect();
//   await c.createWorkspace({ account_id: "local-docker", name: "demo" });
//
// The client keeps a local copy of the caller's workspaces: it applies the
// stream's snapshot and deltas with revision checks, resumes with ?since=
// after a disconnect and reconnects with backoff and jitter. Every HTTP
// route has a helper; failures are thrown as CompanionError with the
// server's code, message and HTTP status.

/**
 * A workspace as the API sends it. Fields other than id, name, provider,
 * account_id, state, created_at, updated_at and rev are left out when
 * null, false, 0 or "": read an absent field as that value.
 * @typedef {object} Workspace
 * @property {string} id
 * @property {string} name
 * @property {string} provider
 * @property {string} account_id
 * @property {"creating"|"running"|"pausing"|"paused"|"stopped"|"resuming"|"deleting"|"deleted"|"error"|"unknown"|string} state
 * @property {string} created_at
 * @property {string} updated_at
 * @property {number} rev
 * @property {string} [box_id]
 * @property {string} [box_url]
 * @property {boolean} [adopted]
 * @property {string|null} [paused_at]
 * @property {string|null} [stop_reason]
 * @property {number|null} [exit_code]
 * @property {number|null} [size_bytes]
 * @property {string|null} [size_source]
 * @property {string|null} [size_at]
 * @property {string|null} [last_activity_at]
 * @property {boolean} [keep]
 * @property {string|null} [delete_after]
 * @property {{idle_pause_after_seconds?: number, paused_ttl_seconds?: number}} [lifecycle]
 * @property {string} [progress]
 * @property {string} [error]
 * @property {string|null} [last_export_at] when the newest verified export was made
 * @property {string} [last_export_id]
 * @property {{clock: string, due_at?: string|null, at_risk?: boolean, export_by?: string|null}} [deletion]
 *   the provider's own deletion clock running on the paused box (API.md "Deletion clocks")
 */

/**
 * @typedef {object} Account
 * @property {string} id
 * @property {string} provider
 * @property {string} label
 * @property {Record<string, string>} config
 * @property {string[]} credentials names of the stored secrets, never values
 * @property {string} created_at
 * @property {{state: "checking"|"ok"|"failing"|string, message?: string, error_code?: string, last_ok_at: string|null, next_attempt_at: string|null}} status
 * @property {{code: string, message: string, since: string}|null} flag
 */

/**
 * @typedef {object} Provider
 * @property {string} name
 * @property {string} version
 * @property {string} description
 * @property {string} kind
 * @property {Record<string, boolean>} capabilities
 * @property {{name: string, description: string, header?: string}[]} credentials
 * @property {{name: string, description: string, example?: string, required?: boolean}[]} config
 * @property {{name: string, description: string, example?: string}[]|null} options
 * @property {{name: string, starts: "paused"|"idle", after_seconds: number, loses: "box"|"files", setting: boolean, note: string}[]} clocks
 *   the provider's deletion clocks ([] when none; API.md "GET /v1/providers")
 * @property {boolean} available
 * @property {string} reason
 * @property {string} [sha256] a Wasm module's SHA-256 (absent for adapters built in Go)
 * @property {string[]} [hosts] origins of a Wasm module's upstreams
 * @property {string[]} [endpoint_hosts] host patterns of the agent-server URLs a Wasm module reports
 */

/**
 * @typedef {object} ExportFile
 * @property {string} name
 * @property {"trajectory"|"archive"|"manifest"|string} kind
 * @property {string|null} conversation_id
 * @property {string|null} format
 * @property {number} bytes
 * @property {string} sha256
 * @property {string} url path of the file under the server, e.g. /v1/exports/exp_…/files/…
 */

/**
 * @typedef {object} Export
 * @property {string} id
 * @property {string} workspace_id
 * @property {string|null} workspace_name what it is an export of, as the workspace was when it began (null on older exports)
 * @property {string|null} provider
 * @property {string|null} account_id
 * @property {string} created_at
 * @property {string} updated_at
 * @property {"running"|"verified"|"failed"|string} state
 * @property {boolean} verified
 * @property {number} bytes
 * @property {string|null} archive_sha256
 * @property {string|null} error
 * @property {ExportFile[]} files
 * @property {boolean} restorable
 */

/**
 * @typedef {object} DeletePreview
 * @property {Workspace} workspace
 * @property {string} token confirms this preview once, until expires_at
 * @property {string} expires_at
 * @property {string[]} lost
 * @property {string[]} survives
 */

/**
 * @typedef {object} AuditEntry
 * @property {number} id
 * @property {string} at
 * @property {string} actor
 * @property {string} action
 * @property {string} [workspace_id]
 * @property {string} [account_id]
 * @property {string} [provider]
 * @property {string} outcome
 * @property {string|null} export_sha256
 * @property {string} prev_hash
 * @property {string} hash
 */

/**
 * What a "change" listener receives: one applied stream message (or a
 * load()).
 * @typedef {object} ChangeEvent
 * @property {"snapshot"|"upsert"|"remove"|"load"} kind
 * @property {number} rev the client's revision after the change
 * @property {Workspace} [workspace] the new state (upsert)
 * @property {string} [id] the removed workspace (remove)
 * @property {boolean} [resync] a snapshot that replaced state after a gap, a 4009 or a ?since= the server could not serve
 */

/**
 * The stream connection's state, as "connection" listeners receive it.
 * @typedef {object} ConnectionState
 * @property {"idle"|"connecting"|"open"|"waiting"|"closed"} state idle: never connected; waiting: disconnected, a reconnect is scheduled; closed: close() was called, or the server ended the stream because its user was removed (closeCode 4011) or its session or token ended (4012), or, before the first sync after connect(), refused the token (401) or the origin (403), after which the client does not reconnect until connect()
 * @property {boolean} synced the local state is current (a snapshot or a ?since= resume was accepted on the open connection)
 * @property {number} attempt failed connection attempts in a row
 * @property {number|null} retryInMs the wait before the next attempt (waiting)
 * @property {number|null} closeCode the last close code the server sent
 * @property {string} closeReason
 */

/**
 * What agent(id).connect() resolves with (POST /v1/workspaces/{id}/connect).
 * @typedef {object} AgentConnection
 * @property {Workspace} workspace the workspace, running
 * @property {boolean} woke whether connect had to resume a paused or stopped box
 * @property {string} agentPath where the agent-server is, below baseUrl: "/v1/workspaces/{id}/agent"
 */

/**
 * A conversation as the agent-server lists it (its ConversationInfo; more
 * fields come along: agent, workspace, metrics…).
 * @typedef {object} Conversation
 * @property {string} id a UUID, dashed
 * @property {string|null} title
 * @property {"idle"|"running"|"paused"|"waiting_for_confirmation"|"finished"|"error"|"stuck"|"deleting"|string} execution_status
 * @property {string} created_at
 * @property {string} updated_at when it last had an event: its last activity
 * @property {Record<string, string>} tags
 */

/**
 * One page of the agent-server's GET /api/conversations/search.
 * @typedef {object} ConversationPage
 * @property {Conversation[]} items
 * @property {string|null} next_page_id pass it as pageId for the next page; null on the last
 */

/**
 * One event of a conversation, as the agent-server sends it on its events
 * socket (MessageEvent, ActionEvent, ObservationEvent,
 * ConversationStateUpdateEvent…; clients must accept kinds they do not know).
 * @typedef {object} AgentEvent
 * @property {string} kind
 * @property {string} [id]
 * @property {string} [timestamp]
 * @property {string} [source] "user", "agent" or "environment"
 */

/**
 * A failed request: the server's error code, message and HTTP status.
 * Network failures have status 0 and code "network".
 */
export class CompanionError extends Error {
  /**
   * @param {number} status HTTP status, 0 when no answer arrived
   * @param {string} code the API's error code (API.md, Errors)
   * @param {string} message
   * @param {object} [details] the whole error object (state, module, operation, field…)
   * @param {number|null} [retryAfter] seconds, from Retry-After
   */
  constructor(status, code, message, details = {}, retryAfter = null) {
    super(message);
    this.name = "CompanionError";
    /** @type {number} */
    this.status = status;
    /** @type {string} */
    this.code = code;
    /** @type {Record<string, any>} */
    this.details = details;
    /** @type {string|undefined} the workspace's state on a 409 */
    this.state = details && typeof details.state === "string" ? details.state : undefined;
    /** @type {number|null} */
    this.retryAfter = retryAfter;
  }
}

/** The subprotocol the stream speaks. */
export const SUBPROTOCOL = "companion.v1";
/** Browsers carry the token in a second subprotocol (they cannot set headers on a WebSocket). */
export const BEARER_SUBPROTOCOL_PREFIX = "companion.bearer.";

/** Close codes of the stream (API.md, Close codes). */
export const CloseCode = Object.freeze({
  GOING_AWAY: 1001,
  TOO_BIG: 1009,
  INTERNAL: 1011,
  SLOW_CONSUMER: 4008,
  STREAM_RESET: 4009,
  NO_PONG: 4010,
  USER_REMOVED: 4011,
  SIGNED_OUT: 4012,
});

/**
 * Close codes of a socket to the agent-server through companion (API.md,
 * "/v1/workspaces/{id}/agent/{path}"): the agent-server's own, and
 * companion's 4013.
 */
export const AgentCloseCode = Object.freeze({
  NORMAL: 1000,
  /** companion is shutting down */
  GOING_AWAY: 1001,
  /** the agent-server is stopping (the box is pausing or restarting): as AGENT_GONE */
  SERVER_RESTART: 1012,
  /** the agent-server is busy (too many sockets on the conversation): try again later */
  TRY_AGAIN: 1013,
  /** the agent-server refused the box's key: a bug, companion attaches it */
  AUTH_FAILED: 4001,
  /** no such conversation in this box */
  CONVERSATION_NOT_FOUND: 4004,
  /** the box's side went away (paused, stopped, died, network): connect() again, then reopen */
  AGENT_GONE: 4013,
});

/**
 * The workspaces of a snapshot message as objects, whichever form it came
 * in (API.md, "Snapshot in table form"): its "workspaces", or its "rows"
 * read against its "fields", leaving out null values and putting a field
 * "a.b" into object a. Returns null when the message holds neither.
 * @param {any} msg
 * @returns {Workspace[]|null}
 */
export function snapshotWorkspaces(msg) {
  if (Array.isArray(msg.workspaces)) return msg.workspaces;
  const { fields, rows } = msg;
  if (!Array.isArray(fields) || !Array.isArray(rows)) return null;
  const outer = [], inner = [];
  for (const f of fields) {
    if (typeof f !== "string") return null;
    const dot = f.indexOf(".");
    outer.push(dot < 0 ? f : f.slice(0, dot));
    inner.push(dot < 0 ? null : f.slice(dot + 1));
  }
  const out = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    if (!Array.isArray(row) || row.length > fields.length) return null;
    const w = {};
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (v === null) continue;
      if (inner[i] === null) w[outer[i]] = v;
      else (w[outer[i]] ??= {})[inner[i]] = v;
    }
    out[r] = w;
  }
  return out;
}

// Our own close code when the client drops a connection to re-snapshot.
const CLIENT_RESYNC = 4000;

/**
 * @typedef {object} ClientOptions
 * @property {string} baseUrl companion's URL, e.g. the ready line's "http://127.0.0.1:53121" (a path prefix is kept)
 * @property {string|(() => string|Promise<string>)} [token] the bearer token, or a function asked before every request and connection attempt (companion's token is new on every launch). Without one the client relies on the browser's cookie (serve mode's login session)
 * @property {typeof fetch} [fetch] defaults to globalThis.fetch
 * @property {any} [WebSocket] a WebSocket constructor (browser API shape); defaults to globalThis.WebSocket
 * @property {RequestCredentials} [credentials] fetch's credentials mode; default "same-origin"
 * @property {number} [backoffInitialMs] first reconnect wait before jitter (default 500)
 * @property {number} [backoffMaxMs] longest reconnect wait before jitter (default 30000)
 * @property {number} [handshakeTimeoutMs] how long a connection attempt may take before it counts as failed (default 30000)
 * @property {() => number} [random] jitter source in [0, 1); default Math.random
 * @property {(fn: () => void, ms: number) => any} [setTimeout]
 * @property {(handle: any) => void} [clearTimeout]
 */

/**
 * A client of one companion. HTTP helpers may be used without connect();
 * connect() starts the stream that keeps list() current.
 */
export class CompanionClient {
  /** @param {ClientOptions} options */
  constructor(options) {
    if (!options || typeof options.baseUrl !== "string" || !/^https?:\/\//i.test(options.baseUrl)) {
      throw new TypeError("CompanionClient: baseUrl must be companion's http(s) URL, e.g. the ready line's url");
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this._token = options.token;
    this._fetch = options.fetch || globalThis.fetch?.bind(globalThis);
    this._WebSocket = options.WebSocket || globalThis.WebSocket;
    this._credentials = options.credentials || "same-origin";
    this._backoffInitial = options.backoffInitialMs ?? 500;
    this._backoffMax = options.backoffMaxMs ?? 30000;
    this._handshakeTimeout = options.handshakeTimeoutMs ?? 30000;
    this._handshakeTimer = null;
    this._probing = false;
    this._random = options.random || Math.random;
    this._setTimeout = options.setTimeout || ((fn, ms) => setTimeout(fn, ms));
    this._clearTimeout = options.clearTimeout || ((h) => clearTimeout(h));
    if (typeof this._fetch !== "function") {
      throw new TypeError("CompanionClient: no fetch; pass options.fetch");
    }

    /** @type {Map<string, Workspace>} */
    this._workspaces = new Map();
    /** @type {number|null} the last revision applied; null before any state */
    this._rev = null;
    this._serverOffsetMs = 0;
    /** @type {Map<string, Set<Function>>} */
    this._listeners = new Map();
    /** @type {Map<string, number>} open agent connections by workspace (the stream's "agent" messages) */
    this._agentConns = new Map();

    this._ws = null;
    this._wantOpen = false;
    /** @type {Error|null} the refusal that stopped the client (rejects synced()) */
    this._stopped = null;
    /** connect() waits for its first sync: a refused token or origin stops the client */
    this._firstSync = false;
    this._timer = null;
    this._forceSnapshot = false;
    /** @type {object[]|null} deltas held until the snapshot arrives */
    this._pending = null;
    /** @type {ConnectionState} */
    this._conn = { state: "idle", synced: false, attempt: 0, retryInMs: null, closeCode: null, closeReason: "" };
  }

  // ---- events ----

  /**
   * Listens to "change" (ChangeEvent), "account" (Account), "agent"
   * ({id, connections}: how many requests and sockets are open to a
   * workspace's agent-server through companion), "connection"
   * (ConnectionState) or "error" (Error: a problem the client recovers from
   * by itself, for logs, and the refusals that stop it: a CompanionError
   * with status 401 or 403 when the stream's token or origin is refused,
   * which also rejects connect()). Returns a function that removes the
   * listener.
   * @param {"change"|"account"|"agent"|"connection"|"error"} type
   * @param {(detail: any) => void} listener
   * @returns {() => void}
   */
  on(type, listener) {
    let set = this._listeners.get(type);
    if (!set) this._listeners.set(type, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  _emit(type, detail) {
    for (const fn of [...(this._listeners.get(type) || [])]) {
      try {
        fn(detail);
      } catch (err) {
        // A listener's bug must not break the stream; report it once.
        if (type !== "error") this._emit("error", err);
      }
    }
  }

  // ---- local state ----

  /** The workspaces as last applied, newest first. @returns {Workspace[]} */
  list() {
    return [...this._workspaces.values()].sort(
      (a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? 1 : -1),
    );
  }

  /** @param {string} id @returns {Workspace|undefined} */
  workspace(id) {
    return this._workspaces.get(id);
  }

  /**
   * How many requests and sockets are open to workspace id's agent-server
   * through companion, by anyone signed in as you (0 when the stream has
   * said nothing of it).
   * @param {string} id
   */
  agentConnections(id) {
    return this._agentConns.get(id) || 0;
  }

  /** The last revision applied, or null before any state. */
  get rev() {
    return this._rev;
  }

  /** @returns {ConnectionState} */
  get connection() {
    return { ...this._conn };
  }

  /** The server's clock now, estimated from the last message's server_time (ms since epoch). */
  serverNow() {
    return Date.now() + this._serverOffsetMs;
  }

  /**
   * How long a workspace has been paused, in whole seconds, by the
   * server's clock; null when it is not paused.
   * @param {Workspace} w
   */
  pausedAgeSeconds(w) {
    if (!w || !w.paused_at) return null;
    return Math.max(0, Math.floor((this.serverNow() - Date.parse(w.paused_at)) / 1000));
  }

  /**
   * Seeds the local state, e.g. with listWorkspaces() or a copy an app kept
   * from its last run; the stream then resumes from its rev with ?since=.
   * @param {{rev: number, workspaces: Workspace[], server_time?: string}} state
   */
  load(state) {
    if (!state || !Number.isInteger(state.rev) || state.rev < 0 || !Array.isArray(state.workspaces)) {
      throw new TypeError("load: need {rev: non-negative integer, workspaces: array}");
    }
    this._replace(state.rev, state.workspaces, state.server_time);
    this._emit("change", { kind: "load", rev: this._rev });
  }

  _replace(rev, list, serverTime) {
    this._workspaces = new Map(list.map((w) => [w.id, w]));
    this._rev = rev;
    this._clock(serverTime);
  }

  _clock(serverTime) {
    const t = serverTime ? Date.parse(serverTime) : NaN;
    if (!Number.isNaN(t)) this._serverOffsetMs = t - Date.now();
  }

  // ---- the stream ----

  /**
   * Opens the stream and keeps it open (reconnecting with backoff) until
   * close(). Resolves when the local state is current: a snapshot was
   * applied, or the server accepted ?since= of the state already held.
   * Rejects, and stops the client, on a refusal that retrying cannot fix:
   * the token (401) or the origin (403) refused before that first sync,
   * or the stream ended with 4011 (user removed) or 4012 (signed out); the
   * error is a CompanionError with that status or code. Once synced, a
   * refused reconnect is retried (a restarted companion's new token may
   * reach a token function late) and reported as "error".
   * @returns {Promise<void>}
   */
  connect() {
    if (!this._WebSocket) {
      return Promise.reject(new TypeError("CompanionClient: no WebSocket; pass options.WebSocket (Node 20: run with --experimental-websocket)"));
    }
    this._wantOpen = true;
    this._stopped = null;
    if (!this._conn.synced) this._firstSync = true;
    if (!this._ws && !this._timer && !this._probing) this._open();
    const p = this.synced();
    // A caller that does not wait for it must not get an unhandled
    // rejection (fatal in Node) when it closes the client early.
    p.catch(() => {});
    return p;
  }

  /**
   * Resolves when the local state is current (see connect). It waits
   * across reconnects (companion may still be starting); "connection"
   * events say why an attempt failed (closeReason: a refused token, say),
   * and close() rejects it.
   * @returns {Promise<void>}
   */
  synced() {
    if (this._conn.synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const off = this.on("connection", (c) => {
        if (c.synced) {
          off();
          resolve();
        } else if (c.state === "closed") {
          off();
          reject(this._stopped || new CompanionError(0, "closed", "the client was closed before it synced"));
        }
      });
    });
  }

  // _stop ends the stream for good after a refusal retrying cannot fix;
  // err rejects whoever waits in synced().
  _stop(err, code, reason) {
    this._wantOpen = false;
    this._stopped = err;
    this._setConn({ state: "closed", synced: false, retryInMs: null, closeCode: code, closeReason: reason || "" });
  }

  /** Closes the stream for good (a later connect() opens it again). Local state is kept. */
  close() {
    this._wantOpen = false;
    if (this._timer) this._clearTimeout(this._timer);
    if (this._handshakeTimer) this._clearTimeout(this._handshakeTimer);
    this._timer = this._handshakeTimer = null;
    const ws = this._ws;
    this._ws = null;
    if (ws) {
      try {
        ws.close(1000, "client closed");
      } catch {
        // already closing
      }
    }
    this._setConn({ state: "closed", synced: false, retryInMs: null });
  }

  _setConn(patch) {
    if (patch.synced) this._firstSync = false;
    this._conn = { ...this._conn, ...patch };
    this._emit("connection", { ...this._conn });
  }

  async _open() {
    let token;
    try {
      token = await this._currentToken();
    } catch (err) {
      this._emit("error", err);
      this._retry(null, "token: " + (err && err.message));
      return;
    }
    if (!this._wantOpen) return;
    const since = this._forceSnapshot ? null : this._rev;
    // The snapshot comes in table form (smaller); the client turns it back
    // into objects. A companion that predates it sends objects.
    let url = this.baseUrl.replace(/^http/i, "ws") + "/v1/ws";
    url += since === null ? "?snapshot=table" : "?since=" + since + "&snapshot=table";
    const protocols = [SUBPROTOCOL];
    if (token) protocols.push(BEARER_SUBPROTOCOL_PREFIX + token);

    let ws;
    try {
      ws = new this._WebSocket(url, protocols);
    } catch (err) {
      this._emit("error", err);
      this._retry(null, String(err && err.message));
      return;
    }
    this._ws = ws;
    // Until a snapshot, deltas wait: a connection without ?since= must
    // start from one, and with ?since= the server may still send one.
    this._pending = since === null ? [] : null;
    this._setConn({ state: "connecting", synced: false, retryInMs: null });

    let opened = false;
    // ended runs once per connection, from close or from a handshake
    // failure: Node 20's WebSocket reports a refused or failed handshake
    // with an error event and never a close event.
    const ended = (code, reason) => {
      if (this._ws !== ws) return;
      this._ws = null;
      this._pending = null;
      if (this._handshakeTimer) this._clearTimeout(this._handshakeTimer);
      this._handshakeTimer = null;
      if (!this._wantOpen) return;
      if (code === CloseCode.STREAM_RESET) this._forceSnapshot = true;
      // 4011 and 4012: the user or the credential is gone, and a reconnect
      // with it would be refused. The client stops, as close() does; the
      // application signs in again (or sets a new token) and connects.
      if (opened && (code === CloseCode.USER_REMOVED || code === CloseCode.SIGNED_OUT)) {
        const what = code === CloseCode.USER_REMOVED ? "user_removed" : "signed_out";
        return this._stop(new CompanionError(0, what, `the stream ended (${code}): ${reason || what}`), code, reason);
      }
      if (opened) return this._retry(code, reason);
      // WebSocket APIs hide why a handshake failed; a plain GET of the
      // same route tells a refused token (401) or origin (403) from a
      // companion that is down.
      this._probing = true;
      this._probe().then(({ why, refused }) => {
        this._probing = false;
        if (!this._wantOpen) return;
        // Before the first sync nothing but a new token or origin helps:
        // connect() rejects rather than retry forever.
        if (refused && this._firstSync) return this._stop(refused, code, why);
        this._retry(code, why || reason || "the connection could not be opened");
      });
    };
    this._handshakeTimer = this._setTimeout(() => {
      this._handshakeTimer = null;
      if (opened || this._ws !== ws) return;
      try {
        ws.close();
      } catch {
        // not open yet
      }
      ended(null, `no answer to the handshake within ${this._handshakeTimeout} ms`);
    }, this._handshakeTimeout);
    ws.onopen = () => {
      if (this._ws !== ws) return;
      opened = true;
      if (this._handshakeTimer) this._clearTimeout(this._handshakeTimer);
      this._handshakeTimer = null;
      // With ?since= the held state is current unless a snapshot follows;
      // either way nothing is lost between it and the live stream.
      this._setConn({ state: "open", attempt: 0, synced: since !== null, closeCode: null, closeReason: "" });
      // The server re-sends the counts that are not 0 on every connection;
      // the ones it does not send are 0 now.
      const stale = [...this._agentConns.keys()];
      this._agentConns.clear();
      for (const id of stale) this._emit("agent", { id, connections: 0 });
    };
    ws.onmessage = (ev) => {
      if (this._ws !== ws) return;
      const text = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data);
      let msg;
      try {
        msg = JSON.parse(text);
      } catch (err) {
        this._emit("error", new Error("stream: a message that is not JSON: " + text.slice(0, 80)));
        return;
      }
      this._onMessage(msg);
    };
    ws.onerror = () => {
      // Browsers tell nothing more here, and follow with a close event;
      // before the handshake completes Node 20 does not.
      if (!opened) ended(null, "");
    };
    ws.onclose = (ev) => ended(ev && typeof ev.code === "number" ? ev.code : null, ev && ev.reason);
  }

  // _probe returns why the stream cannot be opened ("" when the gate
  // would let it through: 426, the route wants a WebSocket), and the
  // refusal of the token or origin (401, 403) when that is why.
  async _probe() {
    try {
      await this.request("GET", "/v1/ws");
    } catch (err) {
      if (err instanceof CompanionError && err.status === 426) return { why: "", refused: null };
      const refused = err instanceof CompanionError && (err.status === 401 || err.status === 403) ? err : null;
      if (refused) this._emit("error", err);
      return { why: (err && err.message) || String(err), refused };
    }
    return { why: "", refused: null };
  }

  _retry(code, reason) {
    if (!this._wantOpen) return;
    const attempt = this._conn.attempt + 1;
    // Exponential backoff with equal jitter, so that many clients of a
    // restarted companion do not all come back at the same instant.
    const cap = Math.min(this._backoffMax, this._backoffInitial * 2 ** Math.min(attempt - 1, 30));
    const wait = Math.round(cap / 2 + this._random() * (cap / 2));
    this._setConn({ state: "waiting", synced: false, attempt, retryInMs: wait, closeCode: code, closeReason: reason || "" });
    this._timer = this._setTimeout(() => {
      this._timer = null;
      if (this._wantOpen) this._open();
    }, wait);
  }

  _onMessage(msg) {
    if (!msg || typeof msg.type !== "string") return;
    if (msg.type === "account") {
      this._clock(msg.server_time);
      if (msg.account) this._emit("account", msg.account);
      return;
    }
    if (msg.type === "agent") {
      if (typeof msg.id !== "string" || !Number.isInteger(msg.connections)) return;
      if (msg.connections > 0) this._agentConns.set(msg.id, msg.connections);
      else this._agentConns.delete(msg.id);
      this._emit("agent", { id: msg.id, connections: msg.connections });
      return;
    }
    if (msg.type === "snapshot") {
      const list = snapshotWorkspaces(msg);
      if (!Number.isInteger(msg.rev) || !list) return this._resync("a malformed snapshot");
      const resync = this._rev !== null;
      this._replace(msg.rev, list, msg.server_time);
      this._forceSnapshot = false;
      const held = this._pending || [];
      this._pending = null;
      this._emit("change", { kind: "snapshot", rev: this._rev, resync });
      this._setConn({ synced: true });
      for (const d of held) if (d.rev > this._rev) this._applyDelta(d);
      return;
    }
    if (msg.type !== "upsert" && msg.type !== "remove") return; // unknown types are ignored (API.md)
    if (!Number.isInteger(msg.rev)) return this._resync("a delta without a revision");
    if (this._pending) {
      this._pending.push(msg);
      return;
    }
    this._applyDelta(msg);
  }

  _applyDelta(msg) {
    // Revisions increase strictly on one connection; one that does not
    // means the local copy can no longer be trusted.
    if (this._rev !== null && msg.rev <= this._rev) {
      return this._resync(`revision ${msg.rev} after ${this._rev}`);
    }
    this._clock(msg.server_time);
    if (msg.type === "upsert") {
      if (!msg.workspace || typeof msg.workspace.id !== "string") return this._resync("an upsert without a workspace");
      this._workspaces.set(msg.workspace.id, msg.workspace);
      this._rev = msg.rev;
      this._emit("change", { kind: "upsert", rev: this._rev, workspace: msg.workspace });
    } else {
      if (typeof msg.id !== "string") return this._resync("a remove without an id");
      this._workspaces.delete(msg.id);
      this._rev = msg.rev;
      this._emit("change", { kind: "remove", rev: this._rev, id: msg.id });
    }
  }

  // _resync drops the connection and asks for a fresh snapshot; the local
  // state stays on show until it arrives.
  _resync(why) {
    this._emit("error", new Error("stream: " + why + "; fetching a fresh snapshot"));
    this._forceSnapshot = true;
    const ws = this._ws;
    if (ws) {
      try {
        ws.close(CLIENT_RESYNC, "resync");
      } catch {
        // already closing
      }
    }
  }

  // ---- HTTP ----

  async _currentToken() {
    const t = typeof this._token === "function" ? await this._token() : this._token;
    return t || "";
  }

  /** Replaces the token (companion makes a new one on every launch). @param {string|(() => string|Promise<string>)} token */
  setToken(token) {
    this._token = token;
  }

  /**
   * Makes one request and returns the decoded JSON answer (undefined for
   * 204). Throws CompanionError for any answer but 2xx.
   * @param {string} method
   * @param {string} path starting with "/"
   * @param {{query?: Record<string, string|number|boolean|undefined>, json?: any, body?: BodyInit, contentType?: string, raw?: boolean, headers?: Record<string,string>, signal?: AbortSignal}} [opts]
   * raw: return the Response itself (after the status check)
   */
  async request(method, path, opts = {}) {
    const headers = { Accept: "application/json", ...(opts.headers || {}) };
    const token = await this._currentToken();
    if (token) headers.Authorization = "Bearer " + token;
    let body;
    if (opts.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      headers["Content-Type"] = opts.contentType || "application/octet-stream";
      body = opts.body;
    }
    let url = this.baseUrl + path;
    if (opts.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(opts.query)) if (v !== undefined && v !== null) q.set(k, String(v));
      const s = q.toString();
      if (s) url += "?" + s;
    }
    let resp;
    try {
      resp = await this._fetch(url, { method, headers, body, credentials: token ? "omit" : this._credentials, signal: opts.signal });
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      throw new CompanionError(0, "network", `${method} ${path}: companion did not answer (${err && err.message}); is it running at ${this.baseUrl}?`);
    }
    if (resp.status >= 400) throw await errorOf(resp, method, path);
    if (opts.raw) return resp;
    if (resp.status === 204) return undefined;
    const text = await resp.text();
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw new CompanionError(resp.status, "invalid_response", `${method} ${path}: the answer is not JSON`);
    }
  }

  /** GET /healthz (no token needed). @returns {Promise<{status: string, version: string}>} */
  health() {
    return this.request("GET", "/healthz");
  }

  // providers

  /** GET /v1/providers. @returns {Promise<Provider[]>} */
  async listProviders() {
    return (await this.request("GET", "/v1/providers")).providers;
  }

  /**
   * POST /v1/providers/inspect: what a module does, before trusting it.
   * @param {BodyInit} wasm the module's bytes
   */
  async inspectModule(wasm) {
    return (await this.request("POST", "/v1/providers/inspect", { body: wasm, contentType: "application/wasm" })).module;
  }

  /**
   * POST /v1/providers?sha256=: installs the module the person confirmed.
   * @param {BodyInit} wasm @param {string} sha256 as inspectModule showed it
   */
  async installModule(wasm, sha256) {
    return (await this.request("POST", "/v1/providers", { query: { sha256 }, body: wasm, contentType: "application/wasm" })).module;
  }

  /** DELETE /v1/providers/{name}. @param {string} name */
  async removeModule(name) {
    await this.request("DELETE", "/v1/providers/" + seg(name));
  }

  // accounts

  /** GET /v1/accounts. @returns {Promise<Account[]>} */
  async listAccounts() {
    return (await this.request("GET", "/v1/accounts")).accounts;
  }

  /** GET /v1/accounts/{id}: one account, as listAccounts shows it. @param {string} id @returns {Promise<Account>} */
  async getAccount(id) {
    return (await this.request("GET", "/v1/accounts/" + seg(id))).account;
  }

  /**
   * POST /v1/accounts: the credentials go to the OS keyring and are never returned.
   * @param {{provider: string, label?: string, config?: Record<string,string>, credentials?: Record<string,string>}} account
   * @returns {Promise<Account>}
   */
  async addAccount(account) {
    return (await this.request("POST", "/v1/accounts", { json: account })).account;
  }

  /** DELETE /v1/accounts/{id}. @param {string} id */
  async removeAccount(id) {
    await this.request("DELETE", "/v1/accounts/" + seg(id));
  }

  // workspaces

  /** GET /v1/workspaces: pass the answer to load() to resume the stream from it. @returns {Promise<{rev: number, server_time: string, workspaces: Workspace[]}>} */
  listWorkspaces() {
    return this.request("GET", "/v1/workspaces");
  }

  /** GET /v1/workspaces/{id}. @param {string} id @returns {Promise<Workspace>} */
  async getWorkspace(id) {
    return (await this.request("GET", "/v1/workspaces/" + seg(id))).workspace;
  }

  /**
   * POST /v1/workspaces: answers at once in state creating; the outcome arrives on the stream.
   * @param {{account_id: string, name: string, lifecycle?: {idle_pause_after_seconds?: number, paused_ttl_seconds?: number}, options?: Record<string,string>}} req
   * @returns {Promise<Workspace>}
   */
  async createWorkspace(req) {
    return (await this.request("POST", "/v1/workspaces", { json: req })).workspace;
  }

  /** POST /v1/workspaces/{id}/pause. @param {string} id @returns {Promise<Workspace>} */
  async pauseWorkspace(id) {
    return (await this.request("POST", `/v1/workspaces/${seg(id)}/pause`)).workspace;
  }

  /** POST /v1/workspaces/{id}/resume. @param {string} id @returns {Promise<Workspace>} */
  async resumeWorkspace(id) {
    return (await this.request("POST", `/v1/workspaces/${seg(id)}/resume`)).workspace;
  }

  /** PUT /v1/workspaces/{id}/keep. @param {string} id @param {boolean} keep @returns {Promise<Workspace>} */
  async setKeep(id, keep) {
    return (await this.request("PUT", `/v1/workspaces/${seg(id)}/keep`, { json: { keep: !!keep } })).workspace;
  }

  /** POST /v1/workspaces/{id}/delete-preview: show lost and survives before confirming. @param {string} id @returns {Promise<DeletePreview>} */
  previewDelete(id) {
    return this.request("POST", `/v1/workspaces/${seg(id)}/delete-preview`);
  }

  /**
   * POST /v1/workspaces/{id}/delete with the preview's token (the person's confirmation).
   * @param {string} id @param {string} token from previewDelete
   * @returns {Promise<Workspace>} in state deleting (or deleted)
   */
  async deleteWorkspace(id, token) {
    return (await this.request("POST", `/v1/workspaces/${seg(id)}/delete`, { json: { token } })).workspace;
  }

  /** GET /v1/workspaces/{id}/agent: reaches into the box; call it only when a person asks. @param {string} id */
  async getAgent(id) {
    return /** @type {{idle_seconds: number, uptime_seconds: number, version: string}} */ (
      (await this.request("GET", `/v1/workspaces/${seg(id)}/agent`)).agent
    );
  }

  /**
   * The agent-server in workspace id's box, reached through companion
   * (API.md, "POST /v1/workspaces/{id}/connect" and
   * "/v1/workspaces/{id}/agent/{path}"): companion attaches the box's key
   * and the provider's headers; this client sends only its own credential.
   * @param {string} workspaceId
   * @returns {AgentClient}
   */
  agent(workspaceId) {
    return new AgentClient(this, workspaceId);
  }

  // exports

  /**
   * POST /v1/workspaces/{id}/export: starts a verified export (person-initiated only).
   * @param {string} id @param {{wake?: boolean, gitDelta?: boolean, pauseAgain?: boolean}} [opts]
   *   pauseAgain pauses a box woken for the export once it ends
   * @returns {Promise<Export>} in state running
   */
  async startExport(id, opts = {}) {
    const query = { wake: opts.wake ? "true" : undefined, git_delta: opts.gitDelta ? "true" : undefined,
      pause_again: opts.pauseAgain ? "true" : undefined };
    return (await this.request("POST", `/v1/workspaces/${seg(id)}/export`, { query })).export;
  }

  /** GET /v1/workspaces/{id}/exports, newest first. @param {string} workspaceId @returns {Promise<Export[]>} */
  async listExports(workspaceId) {
    return (await this.request("GET", `/v1/workspaces/${seg(workspaceId)}/exports`)).exports;
  }

  /**
   * GET /v1/exports?gone=true: your exports whose workspace no longer
   * exists, newest first. A page may be short (even empty) while
   * next_before is set: pass it as before for the next page.
   * @param {{before?: string, limit?: number}} [opts]
   * @returns {Promise<{exports: Export[], next_before: string|null}>}
   */
  listGoneExports(opts = {}) {
    return this.request("GET", "/v1/exports", { query: { gone: "true", before: opts.before, limit: opts.limit } });
  }

  /** GET /v1/exports/{id}. @param {string} id @returns {Promise<Export>} */
  async getExport(id) {
    return (await this.request("GET", "/v1/exports/" + seg(id))).export;
  }

  /**
   * The absolute URL of one file of a verified export. Fetching it needs
   * the token (downloadExportFile sends it) or serve mode's cookie.
   * @param {string} exportId @param {string} name
   */
  exportFileUrl(exportId, name) {
    return `${this.baseUrl}/v1/exports/${seg(exportId)}/files/${seg(name)}`;
  }

  /**
   * GET /v1/exports/{id}/files/{name}: the Response, its body unread (a
   * stream), status 200, 206 (range) or 304 (ifNoneMatch matched).
   * @param {string} exportId @param {string} name
   * @param {{range?: string, ifNoneMatch?: string, signal?: AbortSignal}} [opts] range like "bytes=100-"
   * @returns {Promise<Response>}
   */
  downloadExportFile(exportId, name, opts = {}) {
    const headers = { Accept: "application/octet-stream" };
    if (opts.range) headers.Range = opts.range;
    if (opts.ifNoneMatch) headers["If-None-Match"] = opts.ifNoneMatch;
    return this.request("GET", `/v1/exports/${seg(exportId)}/files/${seg(name)}`, { headers, raw: true, signal: opts.signal });
  }

  // audit

  /**
   * GET /v1/audit, newest first; pass next_before as before for the next page.
   * @param {{before?: number, limit?: number}} [opts]
   * @returns {Promise<{entries: AuditEntry[], next_before: number|null}>}
   */
  listAudit(opts = {}) {
    return this.request("GET", "/v1/audit", { query: { before: opts.before, limit: opts.limit } });
  }
}

// States a workspace leaves by itself: connect() waits them out.
const PASSING_STATES = new Set(["creating", "resuming", "pausing"]);

/**
 * A workspace's agent-server through companion. Get one with
 * client.agent(workspaceId). Call connect() first when the box may be
 * paused, and again when a request answers 409 (the box paused since) or a
 * socket ends with 4013 (AgentCloseCode.AGENT_GONE).
 */
export class AgentClient {
  /** @param {CompanionClient} client @param {string} workspaceId */
  constructor(client, workspaceId) {
    this.client = client;
    this.workspaceId = workspaceId;
    /** where the agent-server is, below client.baseUrl (connect() sets it from the server's answer) */
    this.agentPath = `/v1/workspaces/${seg(workspaceId)}/agent`;
  }

  /**
   * POST /v1/workspaces/{id}/connect: resumes a paused or stopped box
   * (this counts as activity), waits for its agent-server and resolves
   * when it answers. A workspace that is creating, resuming or pausing is
   * waited for first, up to waitMs (default 3 minutes).
   * @param {{waitMs?: number, signal?: AbortSignal}} [opts]
   * @returns {Promise<AgentConnection>}
   */
  async connect(opts = {}) {
    const deadline = Date.now() + (opts.waitMs ?? 180000);
    const path = `/v1/workspaces/${seg(this.workspaceId)}/connect`;
    for (let wait = 500; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const c = (await this.client.request("POST", path, { signal: opts.signal })).connect;
        if (c.agent_path) this.agentPath = c.agent_path;
        return { workspace: c.workspace, woke: !!c.woke, agentPath: this.agentPath };
      } catch (err) {
        const passing = err instanceof CompanionError && err.status === 409 &&
          (PASSING_STATES.has(err.state) || /\bbusy\b/.test(err.message));
        if (!passing || Date.now() + wait > deadline) throw err;
      }
      await new Promise((resolve) => this.client._setTimeout(resolve, wait));
      if (opts.signal?.aborted) throw opts.signal.reason;
    }
  }

  /**
   * fetch() of the agent-server's path (e.g. "/api/conversations/search?limit=5")
   * through companion, with this client's credential (the bearer token, or
   * the browser's session cookie when it has none). It resolves with the
   * Response whatever its status, as fetch does: companion's own refusals
   * carry {"error": …} (409: connect first), the agent-server's {"detail": …}.
   * @param {string} path starting with "/", query included
   * @param {RequestInit} [init]
   * @returns {Promise<Response>}
   */
  async fetch(path, init = {}) {
    if (typeof path !== "string" || !path.startsWith("/")) throw new TypeError("agent.fetch: the path must start with /");
    const c = this.client;
    const headers = new Headers(init.headers);
    const token = await c._currentToken();
    if (token) headers.set("Authorization", "Bearer " + token);
    try {
      return await c._fetch(c.baseUrl + this.agentPath + path, { ...init, headers, credentials: token ? "omit" : c._credentials });
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      throw new CompanionError(0, "network", `${init.method || "GET"} ${path}: companion did not answer (${err && err.message}); is it running at ${c.baseUrl}?`);
    }
  }

  /**
   * A WebSocket to the agent-server's path (e.g. "/sockets/bash-events")
   * through companion, offering protocols; the agent-server's choice among
   * them is ws.protocol. The client's token goes along as a bearer header
   * in Node (Electron's main process), whose WebSocket takes headers, and
   * in a browser, which cannot set them, as the subprotocol entry
   * companion.bearer.<token> next to companion.v1 (companion removes both
   * before the agent-server). Without a token the browser's session cookie
   * is used.
   * @param {string} path starting with "/", query included
   * @param {{protocols?: string[]}} [opts]
   * @returns {Promise<WebSocket>} not open yet: wait for its open event
   */
  async socket(path, opts = {}) {
    if (typeof path !== "string" || !path.startsWith("/")) throw new TypeError("agent.socket: the path must start with /");
    const c = this.client;
    if (!c._WebSocket) throw new TypeError("CompanionClient: no WebSocket; pass options.WebSocket (Node 20: run with --experimental-websocket)");
    const token = await c._currentToken();
    const url = c.baseUrl.replace(/^http/i, "ws") + this.agentPath + path;
    const own = opts.protocols || [];
    if (token && c._WebSocket === globalThis.WebSocket && isNode()) {
      return new c._WebSocket(url, { protocols: own, headers: { Authorization: "Bearer " + token } });
    }
    const protocols = token ? [SUBPROTOCOL, BEARER_SUBPROTOCOL_PREFIX + token, ...own] : own;
    return protocols.length ? new c._WebSocket(url, protocols) : new c._WebSocket(url);
  }

  /**
   * The box's conversations (the agent-server's GET /api/conversations/search),
   * one page of up to limit (1 to 100, default 100), or every page with all.
   * @param {{limit?: number, pageId?: string, status?: string, sortOrder?: "CREATED_AT"|"UPDATED_AT"|"CREATED_AT_DESC"|"UPDATED_AT_DESC", all?: boolean, signal?: AbortSignal}} [opts]
   * @returns {Promise<ConversationPage>} with all, every item and next_page_id null
   */
  async conversations(opts = {}) {
    const items = [];
    let pageId = opts.pageId;
    for (;;) {
      const q = new URLSearchParams();
      for (const [k, v] of [["limit", opts.limit], ["page_id", pageId], ["status", opts.status], ["sort_order", opts.sortOrder]]) {
        if (v !== undefined && v !== null) q.set(k, String(v));
      }
      const qs = q.toString();
      const page = await this._json("GET", "/api/conversations/search" + (qs ? "?" + qs : ""), undefined, opts.signal);
      if (!opts.all) return page;
      items.push(...page.items);
      if (!page.next_page_id) return { items, next_page_id: null };
      pageId = page.next_page_id;
    }
  }

  /**
   * Starts a conversation (the agent-server's POST /api/conversations; 201,
   * or 200 for an existing conversation_id). request is what the
   * agent-server takes: agent (its LLM and tools), workspace, title,
   * initial_message…
   * @param {Record<string, any>} request
   * @returns {Promise<Conversation>}
   */
  startConversation(request) {
    return this._json("POST", "/api/conversations", request);
  }

  /**
   * A conversation's events as they happen (the agent-server's
   * /sockets/events/{id}), read with `for await`. resend: true (or "all")
   * sends every past event first; a time (Date or ISO 8601 string) those
   * from that time on; default none. The loop ends when the socket is
   * closed normally (or by close()), and throws CompanionError with code
   * "conversation_not_found" (4004), "agent_gone" (4013, or 1012 from an
   * agent-server that is stopping: the box paused, stopped or died; connect()
   * again, which wakes a paused box, then reopen), "going_away" (1001:
   * companion stopped) or another that says why; a socket that could not be
   * opened throws companion's refusal (409: connect first, 404: no such
   * workspace).
   * @param {string} conversationId
   * @param {{resend?: boolean|"all"|string|Date}} [opts]
   * @returns {AgentEvents}
   */
  events(conversationId, opts = {}) {
    const q = new URLSearchParams();
    const r = opts.resend;
    if (r === true || r === "all") q.set("resend_mode", "all");
    else if (r instanceof Date || (typeof r === "string" && r)) {
      q.set("resend_mode", "since");
      q.set("after_timestamp", r instanceof Date ? r.toISOString() : r);
    }
    const qs = q.toString();
    const path = "/sockets/events/" + seg(conversationId) + (qs ? "?" + qs : "");
    return new AgentEvents(this, path, `conversation ${conversationId}`);
  }

  // _json sends a JSON request to the agent-server and decodes the answer,
  // throwing CompanionError for any answer but 2xx.
  async _json(method, path, body, signal) {
    const init = { method, signal, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await this.fetch(path, init);
    if (resp.status >= 400) throw await errorOf(resp, method, path);
    const text = await resp.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new CompanionError(resp.status, "invalid_response", `${method} ${path}: the agent-server's answer is not JSON`);
    }
  }
}

/**
 * A socket's events, read with `for await (const ev of events)`. Breaking
 * out of the loop, or close(), closes the socket.
 */
export class AgentEvents {
  /** @param {AgentClient} agent @param {string} path @param {string} what for messages */
  constructor(agent, path, what) {
    this._agent = agent;
    this._path = path;
    this._what = what;
    this._queue = [];
    /** @type {{resolve: Function, reject: Function}[]} */
    this._waiters = [];
    this._end = null; // once the socket ended: {error}, null for a normal end
    this._failing = false; // the handshake failed; companion is asked why
    this._closing = false;
    this._ws = null;
    /** Resolves when the socket is open; rejects as the loop would. */
    this.opened = new Promise((resolve, reject) => {
      this._openedResolve = resolve;
      this._openedReject = reject;
    });
    this.opened.catch(() => {}); // a caller reading only the loop must not get an unhandled rejection
    this._open();
  }

  async _open() {
    let ws;
    try {
      ws = await this._agent.socket(this._path);
    } catch (err) {
      return this._finish(err);
    }
    this._ws = ws;
    if (this._closing) return ws.close(1000);
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this._openedResolve();
    };
    ws.onmessage = (ev) => {
      let event;
      try {
        event = JSON.parse(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data));
      } catch {
        return; // the agent-server sends JSON only
      }
      const w = this._waiters.shift();
      if (w) w.resolve({ value: event, done: false });
      else this._queue.push(event);
    };
    // Before the handshake completes Node 20 reports a failure with an
    // error event alone, browsers with error then close: either way ask
    // companion why (a plain GET of the same path gets its refusal).
    const failed = async () => {
      if (this._end || this._failing) return;
      this._failing = true;
      this._finish(await this._whyRefused());
    };
    ws.onerror = () => {
      if (!opened) failed();
    };
    ws.onclose = (ev) => {
      if (!opened) return failed();
      this._finish(this._closeError(ev.code, ev.reason || ""));
    };
  }

  /**
   * Sends a message into the conversation (the agent runs on it): a string
   * is a user's text message; an object is sent as it is (the
   * agent-server's Message: {role, content}).
   * @param {string|object} message
   */
  send(message) {
    if (!this._ws || this._ws.readyState !== 1) throw new CompanionError(0, "not_open", `${this._what}: the events socket is not open (await events.opened)`);
    const m = typeof message === "string" ? { role: "user", content: [{ type: "text", text: message }] } : message;
    this._ws.send(JSON.stringify(m));
  }

  /** Closes the socket; the loop ends without an error. */
  close() {
    this._closing = true;
    if (this._ws) {
      try {
        this._ws.close(1000);
      } catch {
        // already closing
      }
    }
    this._finish(null);
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** @returns {Promise<IteratorResult<AgentEvent>>} */
  next() {
    if (this._queue.length) return Promise.resolve({ value: this._queue.shift(), done: false });
    if (this._end) return this._ended();
    return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
  }

  /** Ends the loop early (break): closes the socket. */
  return() {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  // _ended is next()'s answer once the socket ended: the error, once,
  // then done.
  _ended() {
    const err = this._end.error;
    this._end.error = null;
    return err ? Promise.reject(err) : Promise.resolve({ value: undefined, done: true });
  }

  // _finish ends the stream once; events already queued are still read
  // before the end.
  _finish(error) {
    if (this._end) return;
    if (this._closing) error = null;
    this._end = { error };
    if (error) this._openedReject(error);
    else this._openedResolve();
    for (const w of this._waiters.splice(0)) this._ended().then(w.resolve, w.reject);
  }

  // _closeError is what a close code means to the caller; null for a
  // normal end.
  _closeError(code, reason) {
    const details = { close_code: code, close_reason: reason };
    const e = (c, msg) => new CompanionError(0, c, `${this._what}: ${msg}`, details);
    switch (code) {
      case AgentCloseCode.NORMAL:
      case 1005: // closed without a code
        return null;
      case AgentCloseCode.CONVERSATION_NOT_FOUND:
        return new CompanionError(404, "conversation_not_found", `${this._what} is not in this workspace's box`, details);
      case AgentCloseCode.AGENT_GONE:
      case AgentCloseCode.SERVER_RESTART:
        return e("agent_gone", "the workspace's agent-server went away (the box paused, stopped or lost its network): connect() again, then reopen the events");
      case AgentCloseCode.GOING_AWAY:
        return e("going_away", "companion is shutting down: connect() again once it is back, then reopen the events");
      case AgentCloseCode.TRY_AGAIN:
        return e("try_again", `the agent-server cannot take this socket now (${reason || "try again later"})`);
      case AgentCloseCode.AUTH_FAILED:
        return e("agent_unauthorized", "the agent-server refused the box's key; reopen after connect(), and report it if it persists");
      case 1006:
        return e("connection_lost", "the connection to companion was lost: connect() again, then reopen the events");
      default:
        return e("closed", `the socket closed with ${code}${reason ? " (" + reason + ")" : ""}`);
    }
  }

  // _whyRefused asks companion, with a plain GET of the socket's path, why
  // the handshake failed: its JSON refusal (409 not running, 404, 401…) is
  // the error; anything else (the agent-server's own answer to a GET) says
  // only that the socket could not be opened.
  async _whyRefused() {
    const plain = this._path.split("?")[0];
    try {
      const resp = await this._agent.fetch(plain, { headers: { Accept: "application/json" } });
      if (resp.status >= 400) {
        const err = await errorOf(resp, "GET", plain);
        if (!err.code.startsWith("http_")) return err;
      }
    } catch (err) {
      if (err instanceof CompanionError) return err;
    }
    return new CompanionError(0, "socket_failed", `${this._what}: the events socket could not be opened; connect() and try again`);
  }
}

// isNode tells Node (Electron's main process included), whose global
// WebSocket (undici) takes headers, from a browser page or worker.
function isNode() {
  return typeof document === "undefined" && typeof globalThis.process?.versions?.node === "string";
}

function seg(s) {
  if (typeof s !== "string" || s === "") throw new TypeError("an id or name must be a non-empty string");
  return encodeURIComponent(s);
}

// errorOf reads the API's error envelope; an answer without one (a proxy's
// page, the agent-server's {"detail": …}) still gets the status and a code
// derived from it, http_<status>.
async function errorOf(resp, method, path) {
  const retry = resp.headers.get("Retry-After");
  const retryAfter = retry && /^\d+$/.test(retry) ? Number(retry) : null;
  let text = "";
  try {
    text = await resp.text();
  } catch {
    // the body could not be read; the status still tells
  }
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  const e = body && body.error;
  if (e && typeof e.code === "string") {
    return new CompanionError(resp.status, e.code, e.message || `${method} ${path}: ${resp.status}`, e, retryAfter);
  }
  if (body && body.detail !== undefined) {
    // The agent-server (FastAPI): a string, or a list of validation errors.
    const d = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail).slice(0, 300);
    return new CompanionError(resp.status, "http_" + resp.status, `${method} ${path}: ${d}`, body, retryAfter);
  }
  return new CompanionError(resp.status, "http_" + resp.status, `${method} ${path}: HTTP ${resp.status} ${text.slice(0, 200)}`.trim(), {}, retryAfter);
}

// companion's page: wires the API, the stream and the table to the DOM.
// The token comes from the URL fragment (#token=…, never sent to a
// server), is kept for this tab only (sessionStorage, isolated by port),
// and is removed from the address bar at once.

import { $, clear, el } from "./dom.js";
import { Api, ApiError } from "./api.js";
import { Stream } from "./stream.js";
import { WorkspaceTable, idleWipe } from "./table.js";
import { GoneList } from "./gone.js";
import { RestoreDialog } from "./restore.js";
import { ConversationsPanel } from "./conversations.js";
import { CompanionClient } from "./client/companion.js";
import { bytes, clockWords, span, when } from "./format.js";

const tokenKey = "companion.token";
const base = new URL(".", location.href);
base.hash = "";
base.search = "";

let token = sessionStorage.getItem(tokenKey) || "";

/** takeToken moves a #token=… fragment into memory and clears the address bar. */
function takeToken() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return false;
  history.replaceState(history.state, "", location.pathname + location.search);
  try {
    token = decodeURIComponent(m[1]);
  } catch {
    token = m[1]; // not %-encoded after all; companion will say whether it is right
  }
  sessionStorage.setItem(tokenKey, token);
  return true;
}
takeToken();

const api = new Api(base, () => token);
// The JS client, for the agent in a box (the rest of the page uses api).
const client = new CompanionClient({ baseUrl: base.href, token: () => token });
const providers = new Map(); // name → provider
let guard = { runs: false, margin_seconds: 0, exports: false }; // GET /v1/providers deletion_guard
const agentConns = new Map(); // workspace id → open agent connections (the stream's agent messages)
const accounts = new Map(); // id → account
const removedNames = new Map(); // workspace id → name, of workspaces removed while this page was open

// Where each provider documents the credentials the account form asks for
// (companion's own guides, docs/providers/, are in the repository; each
// field's help comes with GET /v1/providers).
const providerDocs = {
  docker: ["Docker Engine documentation", "https://docs.docker.com/engine/"],
  daytona: ["Daytona documentation: API keys", "https://www.daytona.io/docs/api-keys/"],
  e2b: ["E2B documentation: API key", "https://e2b.dev/docs/api-key"],
  digitalocean: ["DigitalOcean documentation: API tokens", "https://docs.digitalocean.com/reference/api/create-personal-access-token/"],
  runtimeapi: ["OpenHands documentation: remote runtime", "https://docs.openhands.dev/openhands/usage/v0/runtimes/V0_remote"],
  modal: ["Modal documentation: Sandboxes", "https://modal.com/docs/guide/sandbox"],
};

function showError(e) {
  const box = $("error");
  box.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : String(e && e.message ? e.message : e);
  box.hidden = false;
}
$("error").addEventListener("click", () => { $("error").hidden = true; });

/** run calls f and shows its failure; it returns f's result or undefined. */
async function run(f) {
  try {
    const r = await f();
    $("error").hidden = true;
    return r;
  } catch (e) {
    showError(e);
    return undefined;
  }
}

// ---- workspaces ----------------------------------------------------------

const table = new WorkspaceTable({
  scroller: $("ws-scroll"),
  head: $("ws-head"),
  body: $("ws-body"),
  totals: $("ws-totals"),
  empty: $("ws-empty"),
  filtered: $("ws-filtered"),
  now: () => stream.now(),
  accountLabel: (id) => { const a = accounts.get(id); return a ? a.label || a.id : id; },
  accountStatus: (id) => { const a = accounts.get(id); return (a && a.status) || {}; },
  caps: (p) => (providers.get(p) || {}).capabilities || null,
  clocks: (p) => (providers.get(p) || {}).clocks || [],
  onFacets: fillFacets,
  price: (id) => prices.get(id),
  agentConns: (id) => agentConns.get(id) || 0,
  actions: {
    pause: (w) => run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/pause`)),
    resume: (w) => run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/resume`)),
    keep: (w) => run(() => api.call("PUT", `v1/workspaces/${encodeURIComponent(w.id)}/keep`, { keep: !w.keep })),
    exports: (w) => openExports(w),
    // At risk from its provider's deletion clock: export it now, woken
    // for it and paused again, and show the export's progress.
    exportNow: async (w) => {
      if (await run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/export?wake=true&git_delta=true&pause_again=true`))) openExports(w);
    },
    conversations: (w) => conversations.open(w),
    del: (w) => openDelete(w),
  },
});

function fillFacets() {
  for (const [id, key, label] of [["f-state", "state"], ["f-provider", "provider"], ["f-account", "account", (v) => table.accountLabel(v)]]) {
    const sel = $(id);
    const have = new Set([...sel.options].map((o) => o.value));
    for (const v of [...table.facets[key]].sort()) {
      if (!have.has(v)) sel.append(el("option", { value: v }, label ? label(v) : v));
    }
  }
}
for (const [id, key] of [["f-state", "state"], ["f-provider", "provider"], ["f-account", "account"]]) {
  $(id).addEventListener("change", (e) => table.setFilter({ [key]: e.target.value }));
}
$("f-name").addEventListener("input", (e) => table.setFilter({ name: e.target.value }));
$("f-clear").addEventListener("click", () => {
  for (const id of ["f-state", "f-provider", "f-account", "f-name"]) $(id).value = "";
  table.setFilter({ state: "", provider: "", account: "", name: "" });
});
$("ws-empty-create").addEventListener("click", () => {
  $("create").scrollIntoView({ block: "start" });
  ($("c-account").value ? $("c-name") : $("c-account")).focus();
});

/** measure records how long applying a message took, layout included. */
function measure(name, t0) {
  void table.body.getBoundingClientRect().height; // force style and layout now
  performance.clearMeasures(name);
  performance.measure(name, { start: t0, end: performance.now() });
}

const stream = new Stream(() => api.url("v1/ws"), () => token, {
  snapshot(m, t0) {
    table.setAll(m.workspaces || []);
    measure("companion:snapshot", t0);
  },
  upsert(m, t0) {
    table.upsert(m.workspace);
    measure("companion:upsert", t0);
    auditSoon();
    if (exportsOf && m.workspace.id === exportsOf.id) exportsChanged(m.workspace);
    deleteProgress(m.workspace);
    restoreDialog.workspaceChanged(m.workspace);
    conversations.workspaceChanged(m.workspace);
  },
  remove(m) {
    const w = table.get(m.id);
    if (w) removedNames.set(m.id, w.name);
    if (deleting === m.id) deleteDone();
    table.remove(m.id);
    auditSoon();
    gone.refreshSoon(); // its exports are now a deleted workspace's
  },
  account(m) {
    accounts.set(m.account.id, m.account);
    renderAccounts();
    table.refreshAccount(m.account.id); // a failing provider marks its rows stale
  },
  notice(m) {
    showNotice(m);
  },
  agent(m) {
    if (m.connections > 0) agentConns.set(m.id, m.connections);
    else agentConns.delete(m.id);
    table.refresh(m.id);
  },
  state(state, detail) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = detail;
    if (state === "live") wasLive = true;
    // A tab that was live on a token companion no longer takes: its
    // companion restarted (new token) or is gone; only the new page_url helps.
    const lost = state === "signed-out" && !!token && wasLive;
    $("lost").hidden = !lost;
    $("signedout").hidden = state !== "signed-out" || lost;
    const stale = state !== "live" && stream.staleSince;
    $("stale").hidden = !stale;
    if (stale) {
      $("stale").textContent = `Stale: this page shows companion's state as of ${stream.staleSince.toLocaleTimeString()}; it catches up when the connection is back.` +
        (state === "reconnecting" && token ? " If companion was restarted, open the new page_url from its ready line." : "");
    }
    $("ws-table").classList.toggle("stale", !!stale);
    if (state === "live") {
      // The server sends the counts above 0 on every connection.
      agentConns.clear();
      table.tick();
      refreshSideData();
    }
  },
  signedIn,
  // Signed out elsewhere (another tab, an admin, the session's age): a
  // page on the session cookie asks for a sign-in; one given a token
  // keeps the banner (only a new page_url helps).
  async signedOut() {
    if (token || !(await showLogin())) return false;
    $("signedout").hidden = true;
    $("me").hidden = true;
    $("logout").hidden = true;
    return true;
  },
});

async function signedIn() {
  try {
    await api.call("GET", "v1/accounts");
    return true;
  } catch (e) {
    return !(e instanceof ApiError && e.status === 401);
  }
}

let wasLive = false;
setInterval(() => table.tick(), 1000);

// ---- delete: preview, then an explicit confirmation ----------------------

let preview = null;
let deleting = null; // the workspace id whose confirmed delete the dialog follows
const dd = $("delete-dialog");

/** exportPlan puts the preview's export field into words. */
function exportPlan(x) {
  if (!x) return "";
  if (!x.will) return `Nothing is exported: ${x.why || "this workspace cannot be exported"}.`;
  const mode = x.mode === "best_effort"
    ? "best effort: if the export fails, the box is deleted anyway"
    : "required: if the export fails, nothing is deleted";
  return `Exported to ${x.location || "companion's export directory"} as ${x.format || "an archive"} of ${x.archive_path || "the workspace"}` +
    `, then verified; ${x.wake ? "the box is paused and is woken for it" : "the box is not woken"}; mode ${mode}.`;
}

async function openDelete(w) {
  const p = await run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/delete-preview`));
  if (!p) return;
  preview = { w, p };
  deleting = null;
  $("dd-name").textContent = w.name;
  const list = (id, items) => { clear($(id)); for (const t of items || []) $(id).append(el("li", {}, String(t))); };
  list("dd-lost", p.lost);
  list("dd-survives", p.survives);
  $("dd-export").hidden = !p.export;
  $("dd-export-plan").textContent = exportPlan(p.export);
  list("dd-captures", p.export && p.export.will ? p.export.captures : []);
  $("dd-ack").checked = false;
  $("dd-ack").disabled = false;
  $("dd-ack").parentElement.hidden = false;
  $("dd-confirm").hidden = false;
  $("dd-confirm").disabled = true;
  $("dd-cancel").textContent = "Cancel";
  $("dd-progress").hidden = true;
  $("dd-error").hidden = true;
  dd.showModal();
  $("dd-ack").focus();
}
$("dd-ack").addEventListener("change", () => { $("dd-confirm").disabled = !$("dd-ack").checked; });
$("dd-cancel").addEventListener("click", () => dd.close());
dd.addEventListener("close", () => { preview = null; deleting = null; });
$("dd-confirm").addEventListener("click", async () => {
  if (!preview || !$("dd-ack").checked || deleting) return;
  const id = preview.w.id;
  try {
    const r = await api.call("POST", `v1/workspaces/${encodeURIComponent(id)}/delete`, { token: preview.p.token });
    // The dialog stays open and follows the delete: step and bytes from
    // the stream, then its end (removed) or why it was blocked.
    deleting = id;
    $("dd-ack").disabled = true;
    $("dd-ack").parentElement.hidden = true;
    $("dd-confirm").hidden = true;
    $("dd-cancel").textContent = "Close";
    $("dd-error").hidden = true;
    $("dd-progress").hidden = false;
    $("dd-progress").textContent = "Delete started.";
    if (r && r.workspace) deleteProgress(r.workspace);
    $("dd-cancel").focus();
  } catch (e) {
    $("dd-error").textContent = `${e.message} (${e.code || "error"})`;
    $("dd-error").hidden = false;
  }
});

/** deleteProgress shows a confirmed delete's state in the open dialog. */
function deleteProgress(w) {
  if (!deleting || w.id !== deleting) return;
  if (w.state === "deleted") {
    deleteDone();
  } else if (w.state === "deleting") {
    $("dd-progress").textContent = `Deleting: ${w.progress || "working"}`;
  } else {
    // Back to a real state: the delete stopped or was blocked.
    $("dd-progress").textContent = `The delete ended without deleting; the workspace is ${w.state}.`;
    $("dd-error").textContent = w.error || "the delete did not finish";
    $("dd-error").hidden = false;
    deleting = null;
  }
}
function deleteDone() {
  $("dd-progress").textContent = "Deleted. Its exports are listed under Deleted workspaces.";
  deleting = null;
}

// ---- restore, and the exports of deleted workspaces ----------------------

const restoreDialog = new RestoreDialog({
  api,
  accounts: () => accounts.values(),
  current: (id) => table.get(id),
  started: () => { gone.refreshSoon(); auditSoon(); },
});
const gone = new GoneList({ api, run, restore: (x) => restoreDialog.open(x) });
const conversations = new ConversationsPanel({ client });

// ---- exports -------------------------------------------------------------

let exportsOf = null;
let lastProgress = "";

async function openExports(w) {
  exportsOf = w;
  lastProgress = w.progress || "";
  $("exports").hidden = false;
  $("exports-of").textContent = `Exports of ${w.name} (${w.state})`;
  await loadExports();
  $("x-start").focus();
}

function exportsChanged(w) {
  exportsOf = w;
  $("exports-of").textContent = `Exports of ${w.name} (${w.state})`;
  const p = w.progress || "";
  if (p !== lastProgress && (!p || !lastProgress)) loadExports(); // an export began or ended
  lastProgress = p;
}

async function loadExports() {
  if (!exportsOf) return;
  const id = exportsOf.id;
  const data = await run(() => api.call("GET", `v1/workspaces/${encodeURIComponent(id)}/exports`));
  if (!data || !exportsOf || exportsOf.id !== id) return;
  const list = data.exports || [];
  const body = $("exports-table").tBodies[0];
  clear(body);
  for (const x of list) {
    const files = el("td", {});
    if (x.verified && x.restorable) { // it holds a workspace archive or a box snapshot
      files.append(el("button", { type: "button", "data-action": "restore", "aria-label": `Restore export ${x.id}`,
        onclick: () => restoreDialog.open(x) }, "Restore"));
    }
    for (const f of x.files || []) {
      files.append(el("button", { type: "button", "data-file": f.name, "aria-label": `Download ${f.name} (${bytes(f.bytes)})`,
        onclick: () => run(() => api.download(f.url.replace(/^\//, ""), f.name)) }, f.name));
    }
    body.append(el("tr", { "data-export": x.id }, el("td", {}, when(x.created_at)),
      el("td", {}, x.state + (x.error ? ": " + x.error : "")), el("td", {}, bytes(x.bytes)), files));
  }
  if (!list.length) body.append(el("tr", {}, el("td", { colSpan: 4, class: "empty" }, "No exports yet: “Export now” makes one, and every delete exports first.")));
}

$("x-start").addEventListener("click", async () => {
  if (!exportsOf) return;
  const q = `wake=${$("x-wake").checked}&git_delta=${$("x-delta").checked}`;
  if (await run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(exportsOf.id)}/export?${q}`))) loadExports();
});
$("x-close").addEventListener("click", () => { exportsOf = null; $("exports").hidden = true; });

// ---- create --------------------------------------------------------------

function createProvider() {
  const a = accounts.get($("c-account").value);
  return a ? providers.get(a.provider) : null;
}

function fillCreateForm() {
  const sel = $("c-account");
  const was = sel.value;
  clear(sel);
  for (const a of accounts.values()) sel.append(el("option", { value: a.id }, `${a.label || a.id} (${a.provider})`));
  if (accounts.has(was)) sel.value = was;
  createFields();
}

function createFields() {
  const p = createProvider();
  const caps = (p && p.capabilities) || {};
  $("c-lifecycle").hidden = !(caps.native_idle_pause || caps.native_paused_ttl);
  $("c-idle").parentElement.hidden = !caps.native_idle_pause;
  // A paused TTL that sets the provider's own deletion clock is offered
  // only where companion can export first (as the server checks): with
  // exports, and on the desktop only for a provider that never pauses on
  // its own (the desktop is not running when that clock runs out).
  const setting = ((p && p.clocks) || []).find((c) => c.setting);
  const refused = setting && (!guard.exports || (!guard.runs && caps.native_idle_pause));
  $("c-ttl").parentElement.hidden = !caps.native_paused_ttl || !!refused;
  if (refused) $("c-ttl").value = "0";
  $("c-lifecycle").hidden = !(caps.native_idle_pause || (caps.native_paused_ttl && !refused));
  $("c-clocks").textContent = p ? clockTrade(p, setting, refused) : "";
  $("c-clocks").hidden = !$("c-clocks").textContent;
  const box = $("c-options");
  for (const x of box.querySelectorAll(".a-field")) x.remove();
  const opts = (p && p.options) || [];
  box.hidden = opts.length === 0;
  for (const o of opts) box.append(el("label", { title: o.description || "" }, o.name, el("input", { name: o.name, autocomplete: "off", "data-option": o.name })));
}
$("c-account").addEventListener("change", createFields);

/** clockTrade says what the provider deletes on its own and what companion does about it, for the create form. */
function clockTrade(p, setting, refused) {
  const others = (p.clocks || []).filter((c) => !c.setting);
  const parts = others.map((c) => `${p.name} ${clockWords(c)}.`);
  const guardWords = guard.runs
    ? `companion exports a box ${p.name} paused on its own at least ${span(guard.margin_seconds)} before its clock runs out`
    : "this desktop companion cannot export a box while it is not running, so a box the provider paused is marked at risk until you export it";
  if (setting && refused) {
    parts.push(guard.exports
      ? `"Delete when paused" is not offered here: it would set ${p.name}'s ${setting.name}, which deletes the box with no export, and ${guardWords}. Only companion serve sets it.`
      : `"Delete when paused" is not offered here: it would set ${p.name}'s ${setting.name}, and exports are not configured, so nothing would hold the work.`);
  } else if (setting) {
    parts.push(`"Delete when paused" sets ${p.name}'s ${setting.name}, which deletes the box with no export: every pause companion makes exports first (a pause whose export fails keeps the box running), and ${guardWords}.`);
  }
  if (others.length) parts.push(`Every pause companion makes exports first; ${guardWords}.`);
  return parts.join(" ");
}

$("create-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = { account_id: $("c-account").value, name: $("c-name").value };
  const idle = Number($("c-idle").value) * 60, ttl = Number($("c-ttl").value) * 86400;
  if (!$("c-lifecycle").hidden && (idle || ttl)) body.lifecycle = { idle_pause_after_seconds: idle, paused_ttl_seconds: ttl };
  const options = {};
  for (const i of $("c-options").querySelectorAll("input")) if (i.value) options[i.dataset.option] = i.value;
  if (Object.keys(options).length) body.options = options;
  if (await run(() => api.call("POST", "v1/workspaces", body))) $("c-name").value = "";
});

// ---- accounts ------------------------------------------------------------

async function loadAccounts() {
  const data = await run(() => api.call("GET", "v1/accounts"));
  if (!data) return;
  accounts.clear();
  for (const a of data.accounts || []) accounts.set(a.id, a);
  renderAccounts();
  table.tick(); // rows show their account's label and whether it answers
}

function renderAccounts() {
  const body = $("accounts-table").tBodies[0];
  clear(body);
  for (const a of accounts.values()) {
    const st = a.status || {};
    let status = st.state || "";
    if (st.message) status += ": " + st.message;
    if (a.flag) status += ` — ${a.flag.code}: ${a.flag.message}`;
    const remove = el("button", { type: "button", class: "danger", "aria-label": `Remove account ${a.label || a.id}` }, "Remove");
    remove.addEventListener("click", async () => {
      // Two steps: removing forgets the account's workspaces in companion.
      if (remove.dataset.armed !== "yes") {
        remove.dataset.armed = "yes";
        remove.textContent = "Really remove? (its workspaces are forgotten, boxes stay)";
        return;
      }
      if ((await run(() => api.call("DELETE", `v1/accounts/${encodeURIComponent(a.id)}`))) !== undefined) loadAccounts();
    });
    const actions = el("td", {}, remove);
    if (a.delete_export) {
      // What a delete does when its export fails (PATCH, audited as account_change).
      const mode = el("select", { "data-action": "delete-export", "aria-label": `When a delete's export fails, for ${a.label || a.id}` },
        el("option", { value: "required" }, "export required: block the delete"),
        el("option", { value: "best_effort" }, "export best effort: delete anyway"));
      mode.value = a.delete_export;
      mode.addEventListener("change", async () => {
        const r = await run(() => api.call("PATCH", `v1/accounts/${encodeURIComponent(a.id)}`, { delete_export: mode.value }));
        if (r && r.account) { accounts.set(a.id, r.account); auditSoon(); } else mode.value = a.delete_export;
      });
      actions.prepend(mode, " ");
    }
    // A provider that cannot pause and wipes idle boxes' files says so
    // on each of its accounts (Cloudflare's sleep).
    const pv = providers.get(a.provider) || {};
    const wipe = idleWipe({ provider: a.provider, state: "running" }, pv.capabilities || null, pv.clocks || []);
    body.append(el("tr", { "data-account": a.id }, el("td", {}, a.label || a.id),
      el("td", {}, a.provider, wipe ? el("span", { class: "sub", "data-note": "idle-wipe" }, wipe) : null),
      el("td", {}, status), el("td", {}, (a.credentials || []).join(", ") || "—"), actions));
  }
  if (!accounts.size) body.append(el("tr", {}, el("td", { colSpan: 5, class: "empty" }, "No accounts yet: add one with the form below, then create workspaces in it.")));
  fillCreateForm();
  fillFacets();
  fillRetentionAccounts();
  table.tick();
}

function accountFields() {
  const box = $("a-fields");
  for (const x of box.querySelectorAll(".a-field")) x.remove();
  const p = providers.get($("a-provider").value);
  const docs = p && (p.docs_url ? [`${p.name} documentation`, p.docs_url] : providerDocs[p.name]);
  $("a-docs").hidden = !docs;
  if (docs) {
    $("a-docs-link").textContent = docs[0];
    $("a-docs-link").href = docs[1];
  }
  if (!p) return;
  // Each field shows its help: the description under it, the example as
  // its placeholder (GET /v1/providers; docs/providers/ has the guides).
  const field = (name, input, c) => {
    const help = c.description || "";
    const id = `a-help-${input.dataset.config ? "c" : "s"}-${c.name}`;
    if (help) input.setAttribute("aria-describedby", id);
    return el("div", { class: "a-field" }, el("label", {}, name, input),
      help ? el("p", { class: "hint", id }, help) : null);
  };
  for (const c of p.config || []) {
    box.append(field(c.name + (c.required ? " (required)" : ""),
      el("input", { "data-config": c.name, required: !!c.required, autocomplete: "off", placeholder: c.example ? `e.g. ${c.example}` : "" }), c));
  }
  for (const c of p.credentials || []) {
    box.append(field(`${c.name} (secret)`,
      el("input", { type: "password", "data-credential": c.name, required: true, autocomplete: "off" }), c));
  }
  box.hidden = !(p.config || []).length && !(p.credentials || []).length;
}
$("a-provider").addEventListener("change", accountFields);

$("account-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = { provider: $("a-provider").value, label: $("a-label").value, config: {}, credentials: {} };
  for (const i of $("a-fields").querySelectorAll("input[data-config]")) if (i.value) body.config[i.dataset.config] = i.value;
  for (const i of $("a-fields").querySelectorAll("input[data-credential]")) body.credentials[i.dataset.credential] = i.value;
  const r = await run(() => api.call("POST", "v1/accounts", body));
  // The secret is gone from the page either way: it lives in the keyring now.
  for (const i of $("a-fields").querySelectorAll("input[data-credential]")) i.value = "";
  if (r) {
    $("a-label").value = "";
    for (const i of $("a-fields").querySelectorAll("input")) i.value = "";
    loadAccounts();
  }
});

// ---- providers and modules -----------------------------------------------

async function loadProviders() {
  const data = await run(() => api.call("GET", "v1/providers"));
  if (!data) return;
  providers.clear();
  for (const p of data.providers || []) providers.set(p.name, p);
  if (data.deletion_guard) guard = data.deletion_guard;
  const body = $("providers-table").tBodies[0];
  clear(body);
  const sel = $("a-provider");
  const was = sel.value;
  clear(sel);
  for (const p of providers.values()) {
    const caps = Object.entries(p.capabilities || {}).filter(([, v]) => v).map(([k]) => k.replaceAll("_", " "));
    // A Wasm module's pinned hash and the hosts its manifest declares
    // (GET /v1/providers); adapters built in Go have neither.
    const mod = p.sha256 ? moduleCell(p) : (p.kind === "builtin" ? "built in" : p.kind || "—");
    body.append(el("tr", { "data-provider": p.name }, el("td", {}, p.name, el("span", { class: "sub" }, p.description || "")),
      el("td", {}, p.kind || ""), el("td", {}, p.available ? "yes" : "no: " + (p.reason || "")),
      el("td", {}, caps.join(", ") || "—"), el("td", { class: "clocks" }, clocksCell(p.clocks)), el("td", {}, mod)));
    sel.append(el("option", { value: p.name }, p.name));
  }
  if (providers.has(was)) sel.value = was;
  accountFields();
  createFields();
  if (accounts.size) renderAccounts(); // their notes read the providers' capabilities
  table.tick();
}

// clocksCell says in words what the provider deletes on its own (its
// deletion clocks), each with the provider's own note; "none" when nothing.
function clocksCell(clocks) {
  if (!clocks || clocks.length === 0) return "none";
  const ul = el("ul", {});
  for (const c of clocks) ul.append(el("li", { "data-clock": c.name }, clockWords(c), c.note ? el("span", { class: "sub" }, c.note) : null));
  return ul;
}

// moduleCell lists what a module calls and its hash, as text only.
function moduleCell(p) {
  const dl = el("dl", { class: "module" });
  const row = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
  row("Calls", (p.hosts || []).join(", ") || "nothing");
  if (p.endpoint_hosts) row("Agent-server URLs", p.endpoint_hosts.join(", "));
  row("SHA-256", el("code", { "data-sha256": "" }, p.sha256));
  return dl;
}

let inspected = null;
$("m-file").addEventListener("change", async () => {
  const f = $("m-file").files[0];
  inspected = null;
  $("m-install").disabled = true;
  clear($("m-result"));
  if (!f) return;
  const data = await run(() => api.call("POST", "v1/providers/inspect", new Blob([f], { type: "application/wasm" })));
  if (!data) return;
  const m = data.module;
  inspected = { file: f, sha256: m.sha256 };
  const dl = el("dl", {});
  const row = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
  row("Name", `${m.name} ${m.version}`);
  row("SHA-256", m.sha256);
  row("Calls", (m.hosts || []).join(", ") || "nothing");
  for (const c of m.credentials || []) row(`Credential ${c.name}`, `sent as ${c.header} to ${(c.hosts || []).join(", ")}`);
  row("Deletes on its own", clocksCell(m.clocks));
  $("m-result").append(dl);
  $("m-install").disabled = false;
});
$("m-install").addEventListener("click", async () => {
  if (!inspected) return;
  const blob = new Blob([inspected.file], { type: "application/wasm" });
  if (await run(() => api.call("POST", `v1/providers?sha256=${inspected.sha256}`, blob))) loadProviders();
});

// ---- audit ---------------------------------------------------------------

let auditBefore = null;
async function loadAudit(more) {
  const q = more && auditBefore ? `&before=${auditBefore}` : "";
  const data = await run(() => api.call("GET", `v1/audit?limit=50${q}`));
  if (!data) return;
  const body = $("audit-table").tBodies[0];
  if (!more) clear(body);
  for (const e of data.entries || []) {
    const kind = /^(blocked|failed|stopped)\b/.exec(e.outcome || "");
    body.append(el("tr", { "data-action": e.action, "data-outcome": kind ? (kind[1] === "failed" ? "failed" : "blocked") : "" },
      el("td", {}, when(e.at)), el("td", { title: e.actor }, auditActor(e.actor)), el("td", {}, auditAction(e.action)),
      auditSubject(e), el("td", {}, e.outcome + (e.export_sha256 ? ` (export sha256 ${e.export_sha256.slice(0, 12)}…)` : ""))));
  }
  if (!more && !body.rows.length) body.append(el("tr", {}, el("td", { colSpan: 5, class: "empty" }, "Nothing recorded yet: creating, pausing, exporting or deleting a workspace is logged here.")));
  auditBefore = data.next_before;
  $("audit-more").hidden = auditBefore === null || auditBefore === undefined;
}
/** auditAction puts an action name into words; unknown actions are shown as they are. */
function auditAction(a) {
  const words = {
    account_change: "account changed", account_add: "account added", account_remove: "account removed",
    retention_policy: "retention policy", retention_schedule: "retention: scheduled", retention_warn: "retention: warned",
    retention_skip: "retention: skipped", retention_backoff: "retention: backing off",
    handover: "handed over to you",
  };
  return words[a] ? `${words[a]} (${a})` : a;
}

/** auditActor names who acted: a user by name, companion's own parts in words. */
function auditActor(a) {
  if (!a) return "";
  const [kind, rest] = [a.slice(0, a.indexOf(":")), a.slice(a.indexOf(":") + 1)];
  // "user:NAME (ID)": the name; the id (names need not be unique) on hover.
  if (kind === "user") return rest.replace(/ \(u_[^()]*\)$/, "");
  if (kind === "provider") return `${rest} (the provider)`;
  if (kind === "token") return `API token ${rest}`;
  return a;
}

/**
 * auditSubject is the cell naming an entry's workspace or account: by name
 * (a workspace's while it exists, or as it was when it was deleted), with
 * the id beside it and in full on hover.
 */
function auditSubject(e) {
  const cell = (name, id) => el("td", { class: "subject", title: id }, name || id || "", name ? el("span", { class: "sub" }, id) : null);
  if (e.workspace_id) {
    const w = table.get(e.workspace_id);
    return cell(w ? w.name : removedNames.get(e.workspace_id) || gone.names.get(e.workspace_id), e.workspace_id);
  }
  const a = accounts.get(e.account_id);
  return cell(a ? a.label || a.id : "", e.account_id || "");
}

// auditSoon refreshes the newest audit entries after changes, at most
// every 2 s, unless older pages are being read.
let auditTimer = 0;
function auditSoon() {
  if (auditTimer || auditPaged) return;
  auditTimer = setTimeout(() => { auditTimer = 0; if (!auditPaged) loadAudit(false); }, 2000);
}
let auditPaged = false;
$("audit-refresh").addEventListener("click", () => { auditPaged = false; loadAudit(false); });
$("audit-more").addEventListener("click", () => { auditPaged = true; loadAudit(true); });

// ---- retention (shown only when this companion has the routes) -----------

let retentionOn = false;
const prices = new Map(); // account id → storage price per GiB-month (set ones only)
let previewed = null; // the exact request body whose dry run is on screen

function fillRetentionAccounts() {
  if (!retentionOn) return;
  const sel = $("r-account");
  const was = sel.value;
  clear(sel);
  for (const a of accounts.values()) sel.append(el("option", { value: a.id }, a.label || a.id));
  if (accounts.has(was)) sel.value = was;
  if (sel.value !== was) loadRetention();
  loadPrices();
}

/** loadPrices reads every account's storage price, for the totals footer. */
async function loadPrices() {
  const ids = [...accounts.keys()];
  const got = await Promise.all(ids.map((id) => api.call("GET", `v1/accounts/${encodeURIComponent(id)}/retention`).catch(() => null)));
  prices.clear();
  ids.forEach((id, i) => {
    const p = got[i] && got[i].retention && got[i].retention.storage_price_per_gib_month;
    if (p !== null && p !== undefined) prices.set(id, p);
  });
  table.renderTotals();
}

const hours = (sec) => (sec ? String(Math.round((sec / 3600) * 1000) / 1000) : "");

async function loadRetention() {
  const id = $("r-account").value;
  retentionDirty();
  $("r-result").textContent = "";
  if (!id) return;
  const data = await run(() => api.call("GET", `v1/accounts/${encodeURIComponent(id)}/retention`));
  if (!data || $("r-account").value !== id) return;
  const r = data.retention || {};
  $("r-enabled").checked = !!r.enabled;
  $("r-paused").value = hours(r.paused_for_seconds);
  $("r-warn").value = hours(r.warn_before_seconds);
  $("r-price").value = r.storage_price_per_gib_month ?? "";
  const sch = data.scheduler || {};
  $("r-scheduler").textContent = sch.scheduled_deletion
    ? `Enforced here: companion checks every ${sch.interval_seconds || "?"} s.`
    : "Not enforced here: only companion serve deletes on a timer; the dry run shows what it would delete.";
}

/** retentionBody is the policy the form holds, as PUT and preview take it. */
function retentionBody() {
  const body = { enabled: $("r-enabled").checked };
  const secs = (id) => Math.round(Number($(id).value) * 3600);
  if ($("r-paused").value !== "") body.paused_for_seconds = secs("r-paused");
  if ($("r-warn").value !== "") body.warn_before_seconds = secs("r-warn");
  if ($("r-price").value !== "") body.storage_price_per_gib_month = Number($("r-price").value);
  return body;
}

/** retentionDirty enables Save only while the dry run on screen is of the form's exact values. */
function retentionDirty() {
  const same = previewed !== null && previewed.account === $("r-account").value && previewed.body === JSON.stringify(retentionBody());
  $("r-save").disabled = !same;
  $("r-table").classList.toggle("stale", !same);
}
for (const id of ["r-enabled", "r-paused", "r-warn", "r-price"]) $(id).addEventListener("input", retentionDirty);
$("r-enabled").addEventListener("change", retentionDirty);
$("r-account").addEventListener("change", () => { previewed = null; loadRetention(); });

$("r-preview").addEventListener("click", async () => {
  const id = $("r-account").value;
  const body = retentionBody();
  previewed = null;
  retentionDirty();
  const data = await run(() => api.call("POST", `v1/accounts/${encodeURIComponent(id)}/retention/preview`, { ...body, enabled: true }));
  if (!data) return;
  const list = data.workspaces || [];
  let text = list.length
    ? `This policy would delete ${list.length} workspace${list.length === 1 ? "" : "s"}, reclaiming ${bytes(data.reclaim_bytes || 0)}` +
      (data.unknown_sizes ? ` (and ${data.unknown_sizes} of unknown size)` : "") +
      (data.monthly_savings !== null && data.monthly_savings !== undefined ? `, saving ${data.monthly_savings.toFixed(2)} per month.` : ".")
    : "This policy would delete nothing now.";
  if (!data.scheduled_deletion) text += " (Not enforced here: this is what companion serve would do.)";
  if (!body.enabled) text += " The policy is saved switched off: nothing is deleted until it is enabled.";
  for (const n of data.notes || []) text += ` Note: ${n}.`;
  $("r-result").textContent = text;
  const tb = $("r-table").tBodies[0];
  clear(tb);
  for (const w of list) {
    tb.append(el("tr", { "data-id": w.id }, el("td", {}, w.name), el("td", {}, w.state), el("td", {}, when(w.paused_at)),
      el("td", {}, when(w.delete_at)), el("td", {}, bytes(w.size_bytes))));
  }
  $("r-table").hidden = list.length === 0;
  previewed = { account: id, body: JSON.stringify(body) };
  retentionDirty();
});
$("retention-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const id = $("r-account").value;
  const body = retentionBody();
  if (!previewed || previewed.account !== id || previewed.body !== JSON.stringify(body)) return; // no dry run of these values
  if (await run(() => api.call("PUT", `v1/accounts/${encodeURIComponent(id)}/retention`, body))) {
    previewed = null;
    retentionDirty();
    $("r-result").textContent = "Saved.";
    loadPrices();
  }
});

// ---- notices (retention warnings) ----------------------------------------

function showNotice(m) {
  if (m.kind !== "retention_warning") return; // kinds this page does not know are ignored
  const w = table.get(m.workspace_id);
  const name = w ? w.name : m.workspace_id;
  $("notice-list").append(el("li", { "data-kind": m.kind, "data-id": m.workspace_id },
    `Retention: ${name} will be deleted after ${when(m.delete_after)} unless it is resumed or kept.`));
  $("notices").hidden = false;
}
$("notices-clear").addEventListener("click", () => { clear($("notice-list")); $("notices").hidden = true; });

// ---- session (serve mode's login, when this companion has it) ------------

async function loadSession() {
  let me;
  try {
    me = await api.call("GET", "v1/me");
  } catch {
    return; // no such route (desktop)
  }
  const u = (me && (me.user || me)) || {};
  $("me").textContent = `Signed in as ${u.name || u.id || ""}${me.admin ? " (admin)" : ""}`;
  $("me").hidden = false;
  // A session (cookie) can be ended here; a token the page was given cannot.
  $("logout").hidden = me.method !== "session";
}
$("logout").addEventListener("click", async () => {
  await run(() => api.call("POST", "v1/logout", {}));
  sessionStorage.removeItem(tokenKey);
  token = "";
  location.reload();
});

/**
 * showLogin shows the sign-in methods companion offers and reports whether
 * it has any the page can use (a password, or OpenID Connect on this
 * site): GET v1/login lists them; a serve companion without that route
 * (404, or 405 beside POST) has the local form only; 401 there means no
 * sign-in at all (desktop: the page needs its token).
 */
async function showLogin() {
  let methods = ["local"], oidcURL = "";
  try {
    const r = await api.call("GET", "v1/login");
    if (r && Array.isArray(r.methods)) { methods = r.methods; oidcURL = r.oidc_url || ""; }
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 404 || e.status === 405))) return false;
  }
  const oidcHref = methods.includes("oidc") && oidcURL ? new URL(oidcURL, base) : null;
  const oidcHere = oidcHref !== null && oidcHref.origin === location.origin; // only a route of this site
  if (!methods.includes("local") && !oidcHere) {
    // Nothing to sign in with here: with --auth proxy the ingress signs
    // people in, and a reload goes through it again.
    if (methods.includes("proxy")) $("signedout").textContent = "Not signed in: the sign-in at the ingress in front of companion has ended. Reload the page to sign in again.";
    return false;
  }
  $("main").hidden = true;
  $("login").hidden = false;
  $("login-form").hidden = !methods.includes("local");
  const oidc = $("oidc");
  oidc.hidden = !oidcHere;
  if (oidcHere) oidc.href = oidcHref.href;
  (methods.includes("local") ? $("l-name") : oidc).focus();
  return true;
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("login-error").hidden = true;
  try {
    await api.call("POST", "v1/login", { name: $("l-name").value, password: $("l-password").value });
  } catch (err) {
    // The server's own words: a wrong password, too many tries (429), …
    $("login-error").textContent = err.message;
    $("login-error").hidden = false;
    $("l-password").select();
    return;
  } finally {
    $("l-password").value = "";
  }
  $("login").hidden = true;
  $("main").hidden = false;
  stream.failures = 0;
  stream.rev = null; // maybe another user than before: start from a snapshot
  stream.connect();
});

// ---- narrow layout: stacked tables name each value --------------------------

// On a narrow screen the tables other than the workspaces' stack their
// cells; each cell carries its column's name (data-label, shown by
// style.css) so a value still says what it is.
function labelCells(table) {
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const tr of table.tBodies[0].rows) {
    [...tr.cells].forEach((td, i) => { if (heads[i] && td.colSpan === 1 && td.dataset.label !== heads[i]) td.dataset.label = heads[i]; });
  }
}
for (const t of document.querySelectorAll("table:not(#ws-table)")) {
  new MutationObserver(() => labelCells(t)).observe(t.tBodies[0], { childList: true });
}

// ---- start ---------------------------------------------------------------

let sideLoaded = false;
function refreshSideData() {
  loadProviders();
  gone.load(false);
  loadSession(); // the user may have signed in again
  // The audit list names accounts: it follows their list.
  if (!sideLoaded) {
    sideLoaded = true;
    loadAccounts().then(() => { loadAudit(false); detectFeatures(); });
  } else {
    loadAccounts().then(() => loadAudit(false));
    if (retentionOn) loadPrices();
  }
}

async function detectFeatures() {
  const probe = async (path) => {
    try { await api.call("GET", path); return 200; } catch (e) { return e.status; }
  };
  $("module-form").hidden = (await probe("v1/providers/inspect")) !== 405;
  const first = [...accounts.keys()][0] || "local-docker";
  const r = await probe(`v1/accounts/${encodeURIComponent(first)}/retention`);
  retentionOn = r !== 404 && r !== 405 && r !== 0;
  $("retention").hidden = !retentionOn;
  if (retentionOn) fillRetentionAccounts();
}

// A new #token=… (the app restarted companion and re-signs this page)
// reconnects at once, resuming from the last revision.
window.addEventListener("hashchange", () => {
  if (takeToken()) {
    stream.failures = 0;
    stream.connect();
  }
});

/**
 * begin connects with the token, or with the session cookie when there is
 * none; a companion that wants a sign-in (GET v1/me answers 401) gets the
 * login form instead.
 */
async function begin() {
  if (!token) {
    try {
      await api.call("GET", "v1/me");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401 && (await showLogin())) return;
    }
  }
  stream.connect();
}
begin();

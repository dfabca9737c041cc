// companion's page: wires the API, the stream and the table to the DOM.
// The token comes from the URL fragment (#token=…, never sent to a
// server), is kept for this tab only (sessionStorage, isolated by port),
// and is removed from the address bar at once.

import { $, clear, el } from "./dom.js";
import { Api, ApiError } from "./api.js";
import { Stream } from "./stream.js";
import { WorkspaceTable } from "./table.js";
import { bytes, when } from "./format.js";

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
const providers = new Map(); // name → provider
const accounts = new Map(); // id → account

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
  now: () => stream.now(),
  accountLabel: (id) => { const a = accounts.get(id); return a ? a.label || a.id : id; },
  caps: (p) => (providers.get(p) || {}).capabilities || null,
  onFacets: fillFacets,
  actions: {
    pause: (w) => run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/pause`)),
    resume: (w) => run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/resume`)),
    keep: (w) => run(() => api.call("PUT", `v1/workspaces/${encodeURIComponent(w.id)}/keep`, { keep: !w.keep })),
    exports: (w) => openExports(w),
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

/** measure records how long applying a message took, layout included. */
function measure(name, t0) {
  void table.body.getBoundingClientRect().height; // force style and layout now
  performance.clearMeasures(name);
  performance.measure(name, { start: t0, end: performance.now() });
}

const stream = new Stream(() => api.url("v1/ws"), () => token, {
  snapshot(m, t0) {
    performance.clearMarks("companion:parsed");
    performance.mark("companion:parsed"); // how much of it was JSON.parse (make bench)
    table.setAll(m.workspaces || []);
    measure("companion:snapshot", t0);
  },
  upsert(m, t0) {
    table.upsert(m.workspace);
    measure("companion:upsert", t0);
    auditSoon();
    if (exportsOf && m.workspace.id === exportsOf.id) exportsChanged(m.workspace);
  },
  remove(m) {
    table.remove(m.id);
    auditSoon();
  },
  account(m) {
    accounts.set(m.account.id, m.account);
    renderAccounts();
  },
  state(state, detail) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = detail;
    $("signedout").hidden = state !== "signed-out";
    const stale = state !== "live" && stream.staleSince;
    $("stale").hidden = !stale;
    if (stale) $("stale").textContent = `Stale: this page shows companion's state as of ${stream.staleSince.toLocaleTimeString()}; it catches up when the connection is back.`;
    $("ws-table").classList.toggle("stale", !!stale);
    if (state === "live") refreshSideData();
  },
  signedIn,
});

async function signedIn() {
  try {
    await api.call("GET", "v1/accounts");
    return true;
  } catch (e) {
    return !(e instanceof ApiError && e.status === 401);
  }
}

setInterval(() => table.tick(), 1000);

// ---- delete: preview, then an explicit confirmation ----------------------

let preview = null;
const dd = $("delete-dialog");

async function openDelete(w) {
  const p = await run(() => api.call("POST", `v1/workspaces/${encodeURIComponent(w.id)}/delete-preview`));
  if (!p) return;
  preview = { w, p };
  $("dd-name").textContent = w.name;
  const list = (id, items) => { clear($(id)); for (const t of items || []) $(id).append(el("li", {}, String(t))); };
  list("dd-lost", p.lost);
  list("dd-survives", p.survives);
  // Fields later versions add to the preview (what is exported, …) are
  // shown as they come, as text.
  for (const x of dd.querySelectorAll(".extra")) x.remove();
  for (const [k, v] of Object.entries(p)) {
    if (["lost", "survives", "workspace", "token", "expires_at"].includes(k) || v === null || typeof v === "object" && !Array.isArray(v)) continue;
    const items = Array.isArray(v) ? v : [v];
    $("dd-ack").parentElement.before(el("h3", { class: "extra" }, k.replaceAll("_", " ")),
      el("ul", { class: "extra" }, ...items.map((t) => el("li", {}, typeof t === "string" ? t : JSON.stringify(t)))));
  }
  $("dd-ack").checked = false;
  $("dd-confirm").disabled = true;
  $("dd-error").hidden = true;
  dd.showModal();
  $("dd-ack").focus();
}
$("dd-ack").addEventListener("change", () => { $("dd-confirm").disabled = !$("dd-ack").checked; });
$("dd-cancel").addEventListener("click", () => dd.close());
dd.addEventListener("close", () => { preview = null; });
$("dd-confirm").addEventListener("click", async () => {
  if (!preview || !$("dd-ack").checked) return;
  try {
    await api.call("POST", `v1/workspaces/${encodeURIComponent(preview.w.id)}/delete`, { token: preview.p.token });
    dd.close();
  } catch (e) {
    $("dd-error").textContent = `${e.message} (${e.code || "error"})`;
    $("dd-error").hidden = false;
  }
});

// ---- exports -------------------------------------------------------------

let exportsOf = null;
let lastProgress = "";
let restoreOn = null; // unknown until an export is listed

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
  if (restoreOn === null && list.length) {
    // Restore is a later addition: a GET on its route answers 405 when
    // this companion has it.
    restoreOn = await api.call("GET", `v1/exports/${encodeURIComponent(list[0].id)}/restore`).then(() => false, (e) => e.status === 405);
  }
  const body = $("exports-table").tBodies[0];
  clear(body);
  for (const x of list) {
    const files = el("td", {});
    if (restoreOn && x.verified && x.restorable) { // restorable: the export holds a snapshot
      files.append(el("button", { type: "button", "data-action": "restore", "aria-label": `Restore export ${x.id}`,
        onclick: () => run(() => api.call("POST", `v1/exports/${encodeURIComponent(x.id)}/restore`, {})) }, "Restore"));
    }
    for (const f of x.files || []) {
      files.append(el("button", { type: "button", "data-file": f.name, "aria-label": `Download ${f.name} (${bytes(f.bytes)})`,
        onclick: () => run(() => api.download(f.url.replace(/^\//, ""), f.name)) }, f.name));
    }
    body.append(el("tr", { "data-export": x.id }, el("td", {}, when(x.created_at)),
      el("td", {}, x.state + (x.error ? ": " + x.error : "")), el("td", {}, bytes(x.bytes)), files));
  }
  if (!list.length) body.append(el("tr", {}, el("td", { colSpan: 4 }, "No exports yet.")));
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
  $("c-ttl").parentElement.hidden = !caps.native_paused_ttl;
  const box = $("c-options");
  for (const x of box.querySelectorAll("label")) x.remove();
  const opts = (p && p.options) || [];
  box.hidden = opts.length === 0;
  for (const o of opts) box.append(el("label", { title: o.description || "" }, o.name, el("input", { name: o.name, autocomplete: "off", "data-option": o.name })));
}
$("c-account").addEventListener("change", createFields);

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
    body.append(el("tr", { "data-account": a.id }, el("td", {}, a.label || a.id), el("td", {}, a.provider),
      el("td", {}, status), el("td", {}, (a.credentials || []).join(", ") || "—"), el("td", {}, remove)));
  }
  fillCreateForm();
  fillFacets();
  fillRetentionAccounts();
  table.tick();
}

function accountFields() {
  const box = $("a-fields");
  for (const x of box.querySelectorAll("label")) x.remove();
  const p = providers.get($("a-provider").value);
  if (!p) return;
  for (const c of p.config || []) {
    box.append(el("label", { title: c.description || "" }, c.name + (c.required ? " (required)" : ""),
      el("input", { "data-config": c.name, required: !!c.required, autocomplete: "off" })));
  }
  for (const c of p.credentials || []) {
    box.append(el("label", { title: c.description || "" }, `${c.name} (secret)`,
      el("input", { type: "password", "data-credential": c.name, required: true, autocomplete: "off" })));
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
  const body = $("providers-table").tBodies[0];
  clear(body);
  const sel = $("a-provider");
  const was = sel.value;
  clear(sel);
  for (const p of providers.values()) {
    const caps = Object.entries(p.capabilities || {}).filter(([, v]) => v).map(([k]) => k.replaceAll("_", " "));
    // hosts and sha256 are shown when the list carries them; inspect
    // (below) always shows them for a module file.
    const mod = [p.sha256 ? "sha256 " + p.sha256 : "", p.hosts ? "calls " + p.hosts.join(", ") : ""].filter(Boolean).join("; ") || (p.kind === "builtin" ? "built in" : p.kind || "—");
    body.append(el("tr", { "data-provider": p.name }, el("td", {}, p.name, el("span", { class: "sub" }, p.description || "")),
      el("td", {}, p.kind || ""), el("td", {}, p.available ? "yes" : "no: " + (p.reason || "")),
      el("td", {}, caps.join(", ") || "—"), el("td", {}, mod)));
    sel.append(el("option", { value: p.name }, p.name));
  }
  if (providers.has(was)) sel.value = was;
  accountFields();
  createFields();
  table.tick();
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
    body.append(el("tr", {}, el("td", {}, when(e.at)), el("td", {}, e.actor), el("td", {}, e.action),
      el("td", {}, auditSubject(e)), el("td", {}, e.outcome)));
  }
  auditBefore = data.next_before;
  $("audit-more").hidden = auditBefore === null || auditBefore === undefined;
}
/** auditSubject names an entry's workspace (by name while it exists) or account. */
function auditSubject(e) {
  if (e.workspace_id) {
    const w = table.get(e.workspace_id);
    return w ? `${w.name} (${e.workspace_id})` : e.workspace_id;
  }
  const a = accounts.get(e.account_id);
  return a ? `${a.label || a.id} (${e.account_id})` : e.account_id || "";
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
function fillRetentionAccounts() {
  if (!retentionOn) return;
  const sel = $("r-account");
  const was = sel.value;
  clear(sel);
  for (const a of accounts.values()) sel.append(el("option", { value: a.id }, a.label || a.id));
  if (accounts.has(was)) sel.value = was;
}

async function loadRetention() {
  const id = $("r-account").value;
  $("r-save").disabled = true;
  $("r-result").textContent = "";
  const box = $("r-fields");
  for (const x of box.querySelectorAll("label")) x.remove();
  if (!id) return;
  const data = await run(() => api.call("GET", `v1/accounts/${encodeURIComponent(id)}/retention`));
  if (!data) return;
  const policy = data.retention || data.policy || data;
  for (const [k, v] of Object.entries(policy)) {
    if (v !== null && typeof v === "object") continue;
    const input = typeof v === "boolean" ? el("input", { type: "checkbox", checked: v, "data-field": k, "data-kind": "bool" })
      : el("input", { type: typeof v === "number" ? "number" : "text", value: v ?? "", "data-field": k, "data-kind": typeof v === "number" ? "number" : "text" });
    input.addEventListener("input", () => { $("r-save").disabled = true; });
    box.append(el("label", {}, k.replaceAll("_", " "), input));
  }
}

function retentionBody() {
  const out = {};
  for (const i of $("r-fields").querySelectorAll("input")) {
    out[i.dataset.field] = i.dataset.kind === "bool" ? i.checked : i.dataset.kind === "number" ? Number(i.value) : i.value;
  }
  return out;
}
$("r-account").addEventListener("change", loadRetention);
$("r-preview").addEventListener("click", async () => {
  const id = $("r-account").value;
  const data = await run(() => api.call("POST", `v1/accounts/${encodeURIComponent(id)}/retention/preview`, retentionBody()));
  if (!data) return;
  $("r-result").textContent = JSON.stringify(data, null, 2);
  $("r-save").disabled = false; // saved only after its dry run was shown
});
$("retention-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const id = $("r-account").value;
  if (await run(() => api.call("PUT", `v1/accounts/${encodeURIComponent(id)}/retention`, retentionBody()))) {
    $("r-save").disabled = true;
    $("r-result").textContent = "Saved.";
  }
});

// ---- session (serve mode's login, when this companion has it) ------------

async function loadSession() {
  let me;
  try {
    me = await api.call("GET", "v1/me");
  } catch {
    return; // no such route (desktop), or not signed in by cookie
  }
  const u = (me && (me.user || me)) || {};
  $("me").textContent = u.name || u.email || u.id || "";
  $("me").hidden = false;
  $("logout").hidden = false;
}
$("logout").addEventListener("click", async () => {
  await run(() => api.call("POST", "v1/logout", {}));
  sessionStorage.removeItem(tokenKey);
  token = "";
  location.reload();
});

// ---- start ---------------------------------------------------------------

let sideLoaded = false;
function refreshSideData() {
  loadAccounts();
  loadProviders();
  loadAudit(false);
  if (!sideLoaded) {
    sideLoaded = true;
    loadSession();
    detectFeatures();
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
  if (retentionOn) { fillRetentionAccounts(); loadRetention(); }
}

// A new #token=… (the app restarted companion and re-signs this page)
// reconnects at once, resuming from the last revision.
window.addEventListener("hashchange", () => {
  if (takeToken()) {
    stream.failures = 0;
    stream.connect();
  }
});

stream.connect();

// The workspaces table: every workspace in memory, a sorted and filtered
// view of them, and only the rows in sight in the DOM (a store may hold
// 10,000 workspaces). Rows are keyed by workspace id and updated in place,
// so a focused button survives updates.

import { el } from "./dom.js";
import { age, bytes, clockWords, sizeSource, when } from "./format.js";

const overscan = 10;

// Row heights, as style.css sets them: table rows, and the cards of the
// narrow layout (the virtual scrolling counts in these).
const rowHeight = 40, cardHeight = 164;
const narrow = matchMedia("(max-width: 760px)");

/** stopWords says why a box is not running (core.StopReason), as a person would. */
function stopWords(w) {
  switch (w.stop_reason) {
    case "companion": return "by companion";
    case "provider_idle": return `by ${w.provider}, idle`;
    case "outside": return "outside companion";
    case "": case undefined: case null: return "";
    default: return w.stop_reason.replaceAll("_", " ");
  }
}

/** sized reports whether w has a measured size: 0 or unknown is not a size. */
export function sized(w) {
  return typeof w.size_bytes === "number" && w.size_bytes > 0;
}

// One row menu is open at a time; a click elsewhere or Escape closes it.
let openMenu = null;
function closeMenu(focusToggle) {
  if (!openMenu) return;
  const { menu, toggle } = openMenu;
  openMenu = null;
  menu.classList.remove("open", "up");
  toggle.setAttribute("aria-expanded", "false");
  if (focusToggle) toggle.focus();
}
document.addEventListener("click", (e) => {
  if (openMenu && !openMenu.menu.contains(e.target) && !openMenu.toggle.contains(e.target)) closeMenu(false);
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && openMenu) closeMenu(true);
});

const columns = [
  { key: "name", label: "Name" },
  { key: "provider", label: "Provider" },
  { key: "account", label: "Account" },
  { key: "state", label: "State" },
  { key: "size", label: "Size" },
  { key: "paused", label: "Paused" },
  { key: "activity", label: "Activity" },
  { key: "retention", label: "Retention" },
  { key: "progress", label: "Progress" },
  { key: "actions", label: "Actions", nosort: true },
];

const num = (t) => (t ? Date.parse(t) : NaN);

/** sort keys: each maps a workspace to a comparable value. */
const keyOf = {
  name: (w) => w.name.toLowerCase(),
  provider: (w) => w.provider,
  account: (w) => w.account_id,
  state: (w) => w.state,
  size: (w) => w.size_bytes ?? -1,
  // The longest paused first when ascending: an earlier paused_at.
  paused: (w) => (w.state === "paused" && w.paused_at ? num(w.paused_at) : Infinity),
  activity: (w) => num(w.last_activity_at) || 0,
  retention: (w) => (w.keep ? Infinity : num(w.delete_after) || Infinity - 1),
  progress: (w) => w.progress || "",
};

export class WorkspaceTable {
  /**
   * @param {Object} o
   * @param {HTMLElement} o.scroller the scrolling box around the table
   * @param {HTMLElement} o.head the header row
   * @param {HTMLElement} o.body the tbody
   * @param {HTMLElement} o.totals the footer cell
   * @param {HTMLElement} o.empty shown when there is nothing to list
   * @param {() => number} o.now the server's clock, estimated (ms)
   * @param {(id: string) => string} o.accountLabel
   * @param {(id: string) => {state?: string, message?: string, last_ok_at?: string}} o.accountStatus the account's status (GET /v1/accounts)
   * @param {(provider: string) => any} o.caps the provider's capabilities, or null
   * @param {(provider: string) => any[]} [o.clocks] the provider's deletion clocks (GET /v1/providers)
   * @param {Record<string, (w: any) => void>} o.actions pause, resume, keep, exports, conversations, del
   * @param {(id: string) => number} o.agentConns open connections to the workspace's agent through companion
   * @param {() => void} o.onFacets called when a new state, provider or account appears
   * @param {(account: string) => (number|null|undefined)} [o.price] storage price per GiB-month of an account
   */
  constructor(o) {
    Object.assign(this, o);
    this.all = new Map(); // id → workspace; null until index() after a snapshot
    this.list = null; // the snapshot's workspaces while all is null
    this.view = [];
    this.filter = { state: "", provider: "", account: "", name: "" };
    this.sortKey = "name";
    this.sortDir = 1;
    this.rows = new Map(); // id → row, for the rows in the DOM
    this.facets = { state: new Set(), provider: new Set(), account: new Set() };
    this.rowH = narrow.matches ? cardHeight : rowHeight;
    narrow.addEventListener("change", () => { this.rowH = narrow.matches ? cardHeight : rowHeight; this.render(); });
    this.maxSize = 0;
    this.top = el("tr", { class: "spacer", "aria-hidden": "true" }, el("td", { colSpan: columns.length }));
    this.bottom = el("tr", { class: "spacer", "aria-hidden": "true" }, el("td", { colSpan: columns.length }));
    this.body.replaceChildren(this.top, this.bottom);
    this.headButtons = {};
    for (const c of columns) {
      const th = el("th", { scope: "col", "data-col": c.key });
      if (c.nosort) th.textContent = c.label;
      else {
        const b = el("button", { type: "button", onclick: () => this.sortBy(c.key) }, c.label);
        this.headButtons[c.key] = { th, b };
        th.append(b);
      }
      this.head.append(th);
    }
    this.markSort();
    let pending = false;
    this.scroller.addEventListener("scroll", () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; this.render(); });
    });
  }

  compare = (a, b) => {
    const f = keyOf[this.sortKey];
    const x = f(a), y = f(b);
    if (x < y) return -this.sortDir;
    if (x > y) return this.sortDir;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  };

  passes(w) {
    const f = this.filter;
    return (!f.state || w.state === f.state) && (!f.provider || w.provider === f.provider) &&
      (!f.account || w.account_id === f.account) && (!f.name || w.name.toLowerCase().includes(f.name));
  }

  // noteFacets records w's state, provider and account for the filters;
  // plain code on purpose: it runs 10,000 times on a snapshot, before the
  // JIT has warmed up.
  noteFacets(w) {
    const f = this.facets;
    let added = false;
    if (!f.state.has(w.state)) { f.state.add(w.state); added = true; }
    if (!f.provider.has(w.provider)) { f.provider.add(w.provider); added = true; }
    if (!f.account.has(w.account_id)) { f.account.add(w.account_id); added = true; }
    return added;
  }

  /**
   * setAll replaces every workspace (a snapshot). The rows in sight are
   * rendered first; the index by id and the filters' choices are built
   * right after (or as soon as something needs them), so the first
   * render does not wait for them.
   */
  setAll(list) {
    this.all = null;
    this.list = list;
    this.rebuildFrom(list);
    clearTimeout(this.indexTimer);
    this.indexTimer = setTimeout(() => this.index(), 0);
  }

  /** index returns the workspaces by id, building the map after a snapshot. */
  index() {
    if (this.all) return this.all;
    clearTimeout(this.indexTimer);
    const all = new Map();
    let added = false;
    for (const w of this.list) {
      all.set(w.id, w);
      if (this.noteFacets(w)) added = true;
    }
    this.all = all;
    this.list = null;
    if (added) this.onFacets();
    return all;
  }

  /** get returns the workspace with id, or undefined. */
  get(id) {
    return this.index().get(id);
  }

  /** size is how many workspaces there are, filtered or not. */
  size() {
    return this.all ? this.all.size : this.list.length;
  }

  /** upsert inserts or replaces one workspace, moving only its row. */
  upsert(w) {
    const all = this.index();
    const old = all.get(w.id);
    all.set(w.id, w);
    if (old) {
      const i = this.indexOf(old);
      if (i >= 0) this.view.splice(i, 1);
    }
    if (this.passes(w)) this.view.splice(this.insertionPoint(w), 0, w);
    if (this.noteFacets(w)) this.onFacets();
    this.render();
  }

  /** remove drops one workspace. */
  remove(id) {
    const all = this.index();
    const old = all.get(id);
    if (!old) return;
    all.delete(id);
    const i = this.indexOf(old);
    if (i >= 0) this.view.splice(i, 1);
    this.render();
  }

  indexOf(w) {
    // The view is sorted by compare: binary search, then the exact object.
    let lo = 0, hi = this.view.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.compare(this.view[mid], w) < 0) lo = mid + 1; else hi = mid;
    }
    if (this.view[lo] === w) return lo;
    return this.view.indexOf(w);
  }

  insertionPoint(w) {
    let lo = 0, hi = this.view.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.compare(this.view[mid], w) < 0) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  setFilter(f) {
    this.filter = { ...this.filter, ...f, name: (f.name ?? this.filter.name).toLowerCase() };
    this.rebuild();
  }

  sortBy(key) {
    if (this.sortKey === key) this.sortDir = -this.sortDir;
    else { this.sortKey = key; this.sortDir = 1; }
    this.markSort();
    this.rebuild();
  }

  markSort() {
    for (const [k, { th }] of Object.entries(this.headButtons)) {
      th.setAttribute("aria-sort", k === this.sortKey ? (this.sortDir > 0 ? "ascending" : "descending") : "none");
    }
  }

  rebuild() {
    this.rebuildFrom(this.all ? this.all.values() : this.list);
  }

  rebuildFrom(workspaces) {
    // Each sort key is computed once per workspace, not once per
    // comparison (10,000 workspaces: some 280,000 comparisons).
    const f = keyOf[this.sortKey], dir = this.sortDir;
    const items = [];
    for (const w of workspaces) if (this.passes(w)) items.push({ k: f(w), w });
    items.sort((a, b) => (a.k < b.k ? -dir : a.k > b.k ? dir : a.w.id < b.w.id ? -1 : a.w.id > b.w.id ? 1 : 0));
    this.view = items.map((x) => x.w);
    this.render();
  }

  /** render puts the rows in sight (plus some) into the DOM. */
  render() {
    const n = this.view.length;
    const top = this.scroller.scrollTop;
    const h = this.scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.rowH) - overscan);
    const last = Math.min(n, Math.ceil((top + h) / this.rowH) + overscan);
    this.top.style.height = first * this.rowH + "px";
    this.bottom.style.height = (n - last) * this.rowH + "px";
    // Sizes are drawn against the largest workspace in the view.
    let max = 0;
    for (const w of this.view) if (sized(w) && w.size_bytes > max) max = w.size_bytes;
    this.maxSize = max;
    const keep = new Map();
    let prev = this.top;
    for (let i = first; i < last; i++) {
      const w = this.view[i];
      let row = this.rows.get(w.id);
      if (!row) row = this.makeRow(w);
      this.rows.delete(w.id);
      keep.set(w.id, row);
      this.fill(row, w);
      if (prev.nextSibling !== row.tr) this.body.insertBefore(row.tr, prev.nextSibling);
      prev = row.tr;
    }
    for (const row of this.rows.values()) row.tr.remove();
    this.rows = keep;
    this.empty.hidden = this.size() > 0;
    if (this.filtered) this.filtered.hidden = this.size() === 0 || n > 0;
    this.renderTotals();
  }

  renderTotals() {
    let paused = 0, stored = 0, nsized = 0;
    for (const w of this.view) {
      if (w.state === "paused") paused++;
      if (sized(w)) { stored += w.size_bytes; nsized++; }
    }
    const n = this.size();
    const shown = this.view.length === n ? `${n} boxes` : `${this.view.length} of ${n} boxes`;
    let text = `${shown} · ${paused} paused · ${bytes(stored)} stored (${nsized} sized)`;
    // Money only where an account has a storage price (retention policy);
    // companion only multiplies, in whatever currency the price is in.
    let money = 0, priced = 0;
    if (this.price) {
      for (const w of this.view) {
        const p = this.price(w.account_id);
        if (p === null || p === undefined || !sized(w)) continue;
        money += (w.size_bytes / 2 ** 30) * p;
        priced++;
      }
    }
    if (priced) text += ` · ${money.toFixed(2)} per month (${priced} priced)`;
    this.totals.textContent = text;
  }

  /** refresh re-renders workspace id's row if it is in sight. */
  refresh(id) {
    const row = this.rows.get(id);
    if (row) this.fill(row, row.w);
  }

  /** refreshAccount re-renders the rows in sight of one account. */
  refreshAccount(accountID) {
    for (const row of this.rows.values()) if (row.w.account_id === accountID) this.fill(row, row.w);
  }

  /** tick refreshes what ages with time (paused age, size age) in the rows in sight. */
  tick() {
    for (const row of this.rows.values()) this.fill(row, row.w);
  }

  makeRow(w) {
    const c = {};
    const tr = el("tr", { "data-id": w.id });
    for (const col of columns) {
      c[col.key] = el("td", { "data-col": col.key, class: col.key });
      tr.append(c[col.key]);
    }
    c.nameText = document.createTextNode("");
    c.nameSub = el("span", { class: "sub" });
    c.name.append(c.nameText, c.nameSub);
    c.stateBadge = el("span", { class: "badge" });
    c.stateSub = el("span", { class: "sub" });
    c.agent = el("span", { class: "agent-conns", hidden: true });
    c.stale = el("span", { class: "badge stale", hidden: true });
    c.state.append(c.stateBadge, c.stale, c.stateSub, c.agent);
    c.retText = document.createTextNode("");
    c.risk = el("span", { class: "badge risk", hidden: true });
    c.retSub = el("span", { class: "sub" });
    c.retention.append(c.retText, c.risk, c.retSub);
    c.sizeText = el("span", { class: "size-text" });
    c.sizeFill = el("span", {});
    c.sizeBar = el("span", { class: "bar", "aria-hidden": "true" }, c.sizeFill);
    c.sizeSub = el("span", { class: "sub" });
    c.size.append(el("span", { class: "size-line" }, c.sizeText, c.sizeBar, c.sizeSub));
    const row = { tr, c, w };
    // An action from the menu closes it and leaves the focus on its button
    // (where a dialog the action opens gives it back when it closes).
    const act = (name) => () => { closeMenu(true); this.actions[name](row.w); };
    c.pr = el("button", { type: "button", "data-action": "pause-resume", onclick: () => (row.w.state === "running" ? this.actions.pause(row.w) : this.actions.resume(row.w)) });
    c.keep = el("button", { type: "button", "data-action": "keep", onclick: act("keep") }, "Keep");
    c.exp = el("button", { type: "button", "data-action": "exports", onclick: act("exports") }, "Exports");
    c.conv = el("button", { type: "button", "data-action": "conversations", onclick: act("conversations") }, "Conversations");
    c.del = el("button", { type: "button", "data-action": "delete", class: "danger", onclick: act("del") }, "Delete…");
    c.exportNow = el("button", { type: "button", "data-action": "export-now", hidden: true, onclick: act("exportNow") }, "Export now");
    // The secondary actions: in line on a wide screen, else in a menu
    // behind the toggle (style.css decides which; the buttons are the same).
    c.menu = el("div", { class: "row-menu", id: "menu-" + w.id }, c.keep, c.exp, c.conv, c.del);
    c.toggle = el("button", { type: "button", class: "menu-toggle", "data-action": "menu", "aria-expanded": "false", "aria-controls": c.menu.id,
      onclick: () => {
        if (openMenu && openMenu.menu === c.menu) { closeMenu(false); return; }
        closeMenu(false);
        // Near the bottom of the scrolling box the menu opens upwards.
        const box = this.scroller.getBoundingClientRect(), at = tr.getBoundingClientRect();
        c.menu.classList.toggle("up", at.bottom + 180 > box.bottom && at.top - 180 > box.top);
        c.menu.classList.add("open");
        c.toggle.setAttribute("aria-expanded", "true");
        openMenu = { menu: c.menu, toggle: c.toggle };
        const first = c.menu.querySelector("button:not(:disabled)");
        if (first) first.focus();
      } }, "More ▾");
    c.actions.append(el("div", { class: "row-actions" }, c.exportNow, c.pr, c.toggle, c.menu));
    return row;
  }

  fill(row, w) {
    row.w = w;
    const c = row.c;
    const set = (node, text) => { if (node.textContent !== text) node.textContent = text; };
    const tip = (node, text) => { if (node.title !== text) node.title = text; }; // the full text on hover
    const now = this.now();
    set(c.nameText, w.name);
    set(c.nameSub, w.adopted ? "adopted" : "");
    tip(c.name, w.name);
    set(c.provider, w.provider);
    tip(c.provider, w.provider);
    const label = this.accountLabel(w.account_id);
    set(c.account, label);
    tip(c.account, label === w.account_id ? label : `${label} (${w.account_id})`);
    set(c.stateBadge, w.state);
    c.stateBadge.dataset.state = w.state;
    let why = stopWords(w);
    if (w.exit_code) why += ` (exit ${w.exit_code})`;
    set(c.stateSub, why);
    // The account's provider is not answering: the row is what its last
    // good list saw (the stream's account message; nothing per row).
    const acct = this.accountStatus(w.account_id);
    const stale = acct.state === "failing";
    c.stale.hidden = !stale;
    set(c.stale, stale ? "stale" : "");
    const staleWhy = stale ? `${w.provider} is not answering${acct.message ? ` (${acct.message})` : ""}; shown as its last good list saw it${acct.last_ok_at ? ` at ${when(acct.last_ok_at)}` : ""}` : "";
    tip(c.state, [why ? `${w.state} ${why}` : w.state, staleWhy].filter(Boolean).join("; "));
    // Requests and sockets open to the box's agent through companion
    // (the stream's agent messages): someone is working in it.
    const conns = this.agentConns(w.id);
    c.agent.hidden = conns === 0;
    set(c.agent, conns ? `agent: ${conns}` : "");
    tip(c.agent, conns ? `${conns} request${conns === 1 ? "" : "s"} or socket${conns === 1 ? "" : "s"} open to this box's agent through companion` : "");
    const measured = w.size_bytes !== undefined && w.size_bytes !== null && (sized(w) || !!w.size_at);
    set(c.sizeText, measured ? bytes(w.size_bytes) : "—");
    const sizeWords = measured ? `${sizeSource(w.size_source)}${w.size_at ? `, ${age(now - num(w.size_at))} ago` : ""}` : "";
    set(c.sizeSub, sizeWords);
    tip(c.size, measured ? `${bytes(w.size_bytes)} (${sizeWords})` + (this.maxSize ? `; the largest shown is ${bytes(this.maxSize)}` : "") : "size not measured yet");
    c.sizeBar.hidden = !measured;
    c.sizeFill.style.width = (sized(w) && this.maxSize ? Math.max(2, Math.round((w.size_bytes / this.maxSize) * 100)) : 0) + "%";
    const pausedMs = w.state === "paused" && w.paused_at ? now - num(w.paused_at) : -1;
    set(c.paused, pausedMs >= 0 ? age(pausedMs) : "—");
    c.paused.dataset.age = pausedMs < 0 ? "none" : pausedMs >= 86400e3 ? "days" : "recent";
    tip(c.paused, pausedMs >= 0 ? `paused since ${when(w.paused_at)}` : "");
    set(c.activity, w.last_activity_at ? `${age(now - num(w.last_activity_at))} ago` : "—");
    tip(c.activity, w.last_activity_at ? `last activity ${when(w.last_activity_at)}` : "");
    set(c.retText, w.keep ? "kept" : w.delete_after ? `delete after ${when(w.delete_after)}` : "—");
    const risk = clockRisk(w, now);
    const caps = this.caps(w.provider);
    const wipe = idleWipe(w, caps, this.clocks ? this.clocks(w.provider) : []);
    c.risk.hidden = !risk.atRisk;
    set(c.risk, risk.atRisk ? "at risk" : ""); // a hidden badge's words would still be the cell's text
    set(c.retSub, risk.text || wipe);
    c.retention.toggleAttribute("data-empty", c.retText.textContent === "—" && !risk.text && !wipe);
    tip(c.retention, [c.retText.textContent, risk.text || wipe].filter((x) => x && x !== "—").join("; "));
    c.exportNow.hidden = !risk.atRisk || w.state === "running"; // a running box's clock is met by a pause
    c.exportNow.disabled = !!w.progress;
    c.exportNow.setAttribute("aria-label", `Export ${w.name} now`);
    set(c.progress, w.progress || (w.error ? "error: " + w.error : ""));
    c.progress.classList.toggle("error", !w.progress && !!w.error);
    tip(c.progress, c.progress.textContent);
    const canSuspend = !caps || caps.suspend;
    const pr = w.state === "running" ? "Pause" : "Resume";
    set(c.pr, pr);
    c.pr.setAttribute("aria-label", `${pr} ${w.name}`);
    c.pr.disabled = !canSuspend || !(w.state === "running" || w.state === "paused" || w.state === "stopped");
    tip(c.pr, canSuspend ? "" : wipe || `${w.provider} cannot pause or resume`);
    c.keep.setAttribute("aria-pressed", String(!!w.keep));
    c.keep.setAttribute("aria-label", `Keep ${w.name}`);
    c.exp.setAttribute("aria-label", `Exports of ${w.name}`);
    c.conv.setAttribute("aria-label", `Conversations in ${w.name}`);
    // Connecting resumes a paused or stopped box; other states cannot be connected to.
    c.conv.disabled = !(w.state === "running" || w.state === "paused" || w.state === "stopped");
    c.del.setAttribute("aria-label", `Delete ${w.name}`);
    c.del.disabled = w.state === "deleting" || w.state === "deleted";
    c.toggle.setAttribute("aria-label", `More actions for ${w.name}`);
  }
}

/**
 * idleWipe says, for a workspace at a provider that cannot pause and whose
 * own clock wipes an idle box's files (Cloudflare's sleep), that nothing
 * keeps its files; "" otherwise. Such a box is never offered as pausable,
 * and never shown as if a pause kept its files.
 */
export function idleWipe(w, caps, clocks) {
  if (!caps || caps.suspend || w.state === "deleted" || w.state === "deleting") return "";
  const c = (clocks || []).find((x) => x.loses === "files" && x.starts === "idle");
  if (!c) return "";
  return `${w.provider} cannot pause: its ${c.name} ${clockWords(c)}, and nothing keeps them; export to keep the work`;
}

/**
 * clockRisk says what the provider's own deletion clock means for w (its
 * deletion object) at now (ms): when it deletes and the time left, whether
 * an export holds the box, and,
 * once the provider deleted it, what is left.
 */
export function clockRisk(w, now) {
  if (w.state === "deleted") {
    const left = w.last_export_id ? `newest export ${when(w.last_export_at)}: restore it from Exports` : "no export: its files are lost";
    return { atRisk: false, text: `deleted by ${w.provider}; ${left}` };
  }
  const d = w.deletion;
  if (!d || !d.clock) return { atRisk: false, text: "" };
  const left = d.due_at ? num(d.due_at) - now : 0;
  const due = !d.due_at ? "may delete it at a time it does not publish"
    : `deletes it ${when(d.due_at)}` + (left > 0 ? ` (in ${age(left)})` : " (due now)");
  if (!d.at_risk) return { atRisk: false, text: `${w.provider}'s ${d.clock} ${due}; exported ${when(w.last_export_at)}` };
  const then = w.state === "running"
    ? (d.export_by ? `companion pauses it (export first) by ${when(d.export_by)}` : "pause it before then: a pause keeps its files")
    : (d.export_by ? `companion exports it by ${when(d.export_by)}` : "no export holds it: export it now");
  return { atRisk: true, text: `${w.provider}'s ${d.clock} ${due}; ${then}` };
}

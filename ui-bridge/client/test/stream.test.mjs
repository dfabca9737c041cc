// The stream: snapshot, deltas after an HTTP create, and a forced gap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { account, newClient, waitEvent, waitState } from "./env.mjs";

test("snapshot, then a create's deltas, then pause, keep and delete", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const changes = [];
  c.on("change", (ev) => changes.push(ev));

  await c.connect();
  assert.equal(c.connection.state, "open");
  assert.equal(changes[0]?.kind, "snapshot", "a fresh connection starts with a snapshot");
  const listed = await c.listWorkspaces();
  assert.ok(c.rev <= listed.rev, `stream rev ${c.rev} is not after the list's ${listed.rev}`);
  assert.deepEqual(new Set(c.list().map((w) => w.id)), new Set(listed.workspaces.map((w) => w.id)));

  const before = c.rev;
  const created = await c.createWorkspace({ account_id: account, name: "js stream" });
  assert.equal(created.state, "creating");
  const running = await waitState(c, created.id, "running");
  assert.ok(running.box_id, "a running workspace has a box");
  assert.ok(c.rev > before, "the deltas moved the revision on");
  const upserts = changes.filter((e) => e.kind === "upsert" && e.workspace.id === created.id);
  assert.ok(upserts.length >= 2, "creating and running both arrived as upserts");
  for (let i = 1; i < upserts.length; i++) assert.ok(upserts[i].rev > upserts[i - 1].rev, "revisions increase");
  assert.equal(c.list()[0].id, created.id, "newest first");

  await c.pauseWorkspace(created.id);
  const paused = await waitState(c, created.id, "paused");
  assert.ok(paused.paused_at, "paused_at is set");
  const age = c.pausedAgeSeconds(paused);
  assert.ok(age >= 0 && age < 3600, `paused age ${age}`);
  assert.equal(c.pausedAgeSeconds(running), null);

  const kept = await c.setKeep(created.id, true);
  assert.equal(kept.keep, true);
  await waitEvent(c, "change", () => c.workspace(created.id)?.keep === true, "keep on the stream");

  const preview = await c.previewDelete(created.id);
  assert.ok(preview.token && preview.lost.length > 0 && Array.isArray(preview.survives), "a preview says what is lost");
  const removed = waitEvent(c, "change", (e) => e.kind === "remove" && e.id === created.id, "the remove");
  const deleting = await c.deleteWorkspace(created.id, preview.token);
  assert.ok(["deleting", "deleted"].includes(deleting.state), deleting.state);
  await removed;
  assert.equal(c.workspace(created.id), undefined);
});

test("a forced gap: a revision the server cannot serve brings a fresh snapshot", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const real = await c.listWorkspaces();
  // State from "another database": a revision far in the future and a
  // workspace this companion never had. The server cannot account for
  // what happened after that revision, so it must send a snapshot, and the
  // client must replace its state with it.
  const ghost = { id: "ws_ghost", name: "ghost", provider: "docker", account_id: account, state: "running", created_at: "2020-01-01T00:00:00Z", updated_at: "2020-01-01T00:00:00Z", rev: 1 };
  c.load({ rev: 1e12, workspaces: [ghost] });
  const snap = waitEvent(c, "change", (e) => e.kind === "snapshot", "the snapshot after the gap");
  c.connect();
  const ev = await snap;
  assert.equal(ev.resync, true, "the snapshot replaced held state");
  assert.equal(c.workspace("ws_ghost"), undefined, "the ghost is gone");
  assert.ok(c.rev >= real.rev && c.rev < 1e12, `rev ${c.rev} is the server's`);
  assert.deepEqual(new Set(c.list().map((w) => w.id)), new Set(real.workspaces.map((w) => w.id)));
});

test("resuming with a revision the server knows sends no snapshot", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  c.load(await c.listWorkspaces());
  const kinds = [];
  c.on("change", (e) => kinds.push(e.kind));
  await c.connect();
  assert.equal(c.connection.synced, true, "synced on open");
  const w = await c.createWorkspace({ account_id: account, name: "js since" });
  await waitEvent(c, "change", (e) => e.kind === "upsert" && e.workspace.id === w.id, "the create's upsert");
  assert.ok(!kinds.includes("snapshot"), `kinds ${kinds}`);
  await waitState(c, w.id, "running");
  const p = await c.previewDelete(w.id);
  await c.deleteWorkspace(w.id, p.token);
});

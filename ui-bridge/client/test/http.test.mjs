// The HTTP helpers against a real companion: providers, accounts, agent,
// exports (list, get, download with range and ETag), audit paging.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { account, newClient, poll, url, waitState, removeWorkspace } from "./env.mjs";

test("health, providers and accounts", async () => {
  const c = newClient();
  const h = await c.health();
  assert.equal(h.status, "ok");
  const providers = await c.listProviders();
  const docker = providers.find((p) => p.name === "docker");
  assert.ok(docker && docker.available, "docker is available");
  assert.equal(typeof docker.capabilities.suspend, "boolean");
  const accounts = await c.listAccounts();
  assert.ok(accounts.some((a) => a.id === account && a.provider === "docker"));
  assert.ok(accounts.every((a) => Array.isArray(a.credentials)));
  // One account reads as the list shows it; its status may move on between
  // the two reads.
  const one = await c.getAccount(account);
  const listed = accounts.find((a) => a.id === account);
  assert.deepEqual({ ...one, status: null }, { ...listed, status: null });
  assert.equal(typeof one.status.state, "string");
});

test("a workspace's agent, its export, the export's files and the audit trail", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  await c.connect();
  const w = await c.createWorkspace({ account_id: account, name: "js export" });
  await waitState(c, w.id, "running");

  const agent = await c.getAgent(w.id);
  assert.equal(typeof agent.version, "string");
  assert.equal(typeof agent.uptime_seconds, "number");

  const started = await c.startExport(w.id);
  assert.equal(started.state, "running");
  assert.equal(started.workspace_id, w.id);
  const done = await poll("the export to end", async () => {
    const e = await c.getExport(started.id);
    return e.state !== "running" && e;
  });
  assert.equal(done.state, "verified", `export ended ${done.state}: ${done.error}`);
  assert.equal(done.verified, true);
  const list = await c.listExports(w.id);
  assert.equal(list[0].id, started.id, "newest first");

  const file = done.files.find((f) => f.kind === "manifest");
  assert.ok(file, "a verified export has its manifest");
  assert.equal(c.exportFileUrl(done.id, file.name), url + file.url);
  const r = await c.downloadExportFile(done.id, file.name);
  assert.equal(r.status, 200);
  const bytes = Buffer.from(await r.arrayBuffer());
  assert.equal(bytes.length, file.bytes);
  assert.equal(createHash("sha256").update(bytes).digest("hex"), file.sha256);
  const etag = r.headers.get("etag");
  assert.equal(etag, `"${file.sha256}"`);
  const part = await c.downloadExportFile(done.id, file.name, { range: "bytes=1-" });
  assert.equal(part.status, 206);
  assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(1));
  const same = await c.downloadExportFile(done.id, file.name, { ifNoneMatch: etag });
  assert.equal(same.status, 304);
  await assert.rejects(c.downloadExportFile(done.id, "nothere.zip"), (e) => e.status === 404 && e.code === "not_found");

  // The audit trail pages newest first.
  const first = await c.listAudit({ limit: 2 });
  assert.equal(first.entries.length, 2);
  assert.ok(first.entries[0].id > first.entries[1].id);
  assert.ok(first.entries.some((e) => e.action === "export" && e.workspace_id === w.id));
  const next = await c.listAudit({ before: first.next_before, limit: 2 });
  assert.ok(next.entries.every((e) => e.id < first.entries[1].id));

  await removeWorkspace(c, w.id);
  await poll("the workspace to go", () => !c.workspace(w.id));
  // Exports outlive their workspace, and the delete made one of its own
  // before it removed the box.
  const after = await c.listExports(w.id);
  assert.ok(after.some((e) => e.id === started.id), "the person's export is still listed");
  assert.ok(after.some((e) => e.id !== started.id && e.state === "verified"), "the delete exported first");
  // ... and are listed among the exports of deleted workspaces.
  const gone = await c.listGoneExports({ limit: 500 });
  const mine = gone.exports.find((e) => e.id === started.id);
  assert.ok(mine, "the export is listed as a deleted workspace's");
  assert.equal(mine.workspace_name, "js export");
});

test("reading or removing an unknown account, or removing an unknown module, is refused with the server's code", async () => {
  const c = newClient();
  await assert.rejects(c.removeAccount("acc_doesnotexist"), (e) => e.status === 404 && e.code === "not_found");
  await assert.rejects(c.getAccount("acc_doesnotexist"), (e) => e.status === 404 && e.code === "not_found");
  await assert.rejects(c.removeModule("nosuchmodule"), (e) => e.status === 404 && e.code === "not_found");
  await assert.rejects(c.inspectModule(new Uint8Array([1, 2, 3])), (e) => e.status === 400 && e.code === "invalid");
});

// Errors carry the server's code, message and HTTP status.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompanionClient, CompanionError } from "../companion.js";
import { account, currentToken, newClient, url, waitEvent, waitState, removeWorkspace } from "./env.mjs";

async function rejects(p) {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CompanionError, `not a CompanionError: ${err}`);
    return err;
  }
  assert.fail("the call succeeded");
}

test("an unknown workspace is 404 not_found, naming the id", async () => {
  const c = newClient();
  const err = await rejects(c.getWorkspace("ws_doesnotexist"));
  assert.equal(err.status, 404);
  assert.equal(err.code, "not_found");
  assert.match(err.message, /ws_doesnotexist/);
  for (const call of [() => c.pauseWorkspace("ws_doesnotexist"), () => c.previewDelete("ws_doesnotexist"), () => c.getExport("exp_doesnotexist")]) {
    const e = await rejects(call());
    assert.equal(e.status, 404);
    assert.equal(e.code, "not_found");
  }
});

test("bad input is 400 invalid naming the field; nothing is created", async () => {
  const c = newClient();
  const before = await c.listWorkspaces();
  const err = await rejects(c.createWorkspace({ account_id: account, name: "" }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid");
  assert.match(err.message, /name/);
  const junk = await rejects(c.request("POST", "/v1/workspaces", { json: { account_id: account, name: "x", bogus: 1 } }));
  assert.equal(junk.code, "invalid_json");
  assert.match(junk.message, /bogus/);
  const acc = await rejects(c.addAccount({ provider: "no-such-provider", label: "x" }));
  assert.equal(acc.status, 400);
  const audit = await rejects(c.listAudit({ limit: 0 }));
  assert.equal(audit.code, "invalid");
  assert.match(audit.message, /limit/);
  const after = await c.listWorkspaces();
  assert.equal(after.workspaces.length, before.workspaces.length);
});

test("an illegal transition is 409 conflict with the state", async () => {
  const c = newClient();
  const w = await c.createWorkspace({ account_id: account, name: "js conflict" });
  await c.connect();
  try {
    await waitState(c, w.id, "running");
    const err = await rejects(c.resumeWorkspace(w.id));
    assert.equal(err.status, 409);
    assert.equal(err.code, "conflict");
    assert.equal(err.state, "running");
    assert.match(err.message, /cannot resume/);
  } finally {
    await removeWorkspace(c, w.id);
    c.close();
  }
});

test("a wrong token is 401 unauthorized; on the stream it rejects connect() and stops the client", async () => {
  const c = new CompanionClient({ baseUrl: url, token: "not-the-token", backoffInitialMs: 50, backoffMaxMs: 100 });
  const err = await rejects(c.listWorkspaces());
  assert.equal(err.status, 401);
  assert.equal(err.code, "unauthorized");
  const states = [];
  const errors = [];
  c.on("connection", (s) => states.push(s.state));
  c.on("error", (e) => errors.push(e));
  // Retrying cannot fix a refused token: connect() settles, rejected with
  // the refusal, rather than retry for ever.
  const refused = await rejects(c.connect());
  assert.equal(refused.status, 401);
  assert.equal(refused.code, "unauthorized");
  // The handshake's refusal is invisible to WebSocket APIs; the client
  // finds out why, says so on "error" and in the connection state.
  assert.equal(errors[0]?.code, "unauthorized");
  assert.equal(c.connection.state, "closed");
  assert.match(c.connection.closeReason, /valid token is required/);
  // It stays closed: no reconnect is scheduled (that would go through
  // "waiting" and "connecting" again).
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(states, ["connecting", "closed"]);
  // connect() again, with the right token, works.
  c.setToken(await currentToken());
  await c.connect();
  assert.equal(c.connection.synced, true);
  c.close();
});

test("no companion at the address is a network error, status 0", async () => {
  const c = new CompanionClient({ baseUrl: "http://127.0.0.1:9", token: "x" });
  const err = await rejects(c.health());
  assert.equal(err.status, 0);
  assert.equal(err.code, "network");
});

test("the constructor refuses a base URL that is not http(s); an empty id is refused", async () => {
  assert.throws(() => new CompanionClient({ baseUrl: "ws://127.0.0.1:1" }), TypeError);
  await assert.rejects(newClient().getWorkspace(""), TypeError);
});

test("companion serves this module at /client/companion.js as JavaScript", async () => {
  const { readFile } = await import("node:fs/promises");
  const r = await fetch(url + "/client/companion.js");
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /^text\/javascript/);
  const served = await r.text();
  const local = await readFile(new URL("../companion.js", import.meta.url), "utf8");
  assert.equal(served, local);
  // The token is not needed for the code; it still is for the API.
  assert.ok((await currentToken()).length >= 32);
});

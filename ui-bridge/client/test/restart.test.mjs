// Resume after companion restarts: the client reconnects by itself, with
// ?since= (no snapshot), under the new token, and keeps applying deltas.
import { test } from "node:test";
import assert from "node:assert/strict";
import { account, newClient, restartCompanion, waitEvent, waitState, removeWorkspace } from "./env.mjs";

test("the stream resumes after companion restarts", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  await c.connect();
  const w = await c.createWorkspace({ account_id: account, name: "js restart" });
  await waitState(c, w.id, "running");
  const revBefore = c.rev;

  const states = [];
  c.on("connection", (s) => states.push(s));
  const kinds = [];
  c.on("change", (e) => kinds.push(e.kind));

  const waiting = waitEvent(c, "connection", (s) => s.state === "waiting", "the disconnect");
  const ready = await restartCompanion();
  const lost = await waiting;
  assert.equal(lost.closeCode, 1001, "companion's shutdown closes streams with 1001");
  await waitEvent(c, "connection", (s) => s.state === "open" && s.synced, "the reconnect", 60000);
  assert.ok(c.rev >= revBefore, "the revision survived the restart");
  assert.ok(c.workspace(w.id), "state was kept across the restart");

  // The client asks for the token before every request: the new one works.
  assert.equal(await c.getWorkspace(w.id).then((x) => x.id), w.id);
  assert.equal(ready.token.length >= 32, true);

  await c.pauseWorkspace(w.id);
  await waitState(c, w.id, "paused");
  assert.ok(c.rev > revBefore, "deltas after the restart continue the revision");
  assert.ok(!kinds.includes("snapshot"), `a ?since= resume brought a snapshot: ${kinds}`);

  await removeWorkspace(c, w.id);
});

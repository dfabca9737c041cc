// Run against companion serve --auth local with COMPANION_TOKEN a personal
// API token (e2e/jsclient_test.go, TestJSClientSignedOut).
import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, poll } from "../env.mjs";

test("a revoked token ends the stream (4012) and the client stops instead of retrying", async (t) => {
  const c = newClient();
  t.after(() => c.close()); // a failed check must not leave it reconnecting
  const states = [];
  c.on("connection", (s) => states.push(s.state));
  // The stream opens with the token as a subprotocol entry.
  let timer;
  await Promise.race([
    c.connect(),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the stream did not open with the token within 10 s: ${c.connection.closeReason}`)), 10000);
    }),
  ]).finally(() => clearTimeout(timer));
  assert.equal(c.connection.state, "open");
  const { tokens } = await c.request("GET", "/v1/tokens");
  assert.equal(tokens.length, 1, "the test user has one token, the one in use");
  await c.request("DELETE", `/v1/tokens/${tokens[0].id}`);

  const s = await poll("the stream to end", () => (c.connection.state === "closed" ? c.connection : null), 10000);
  assert.equal(s.closeCode, 4012);
  assert.match(s.closeReason, /signed out/);
  // It stays closed: no reconnect is scheduled (that would go through
  // "waiting" and "connecting").
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(c.connection.state, "closed");
  assert.deepEqual(states.slice(states.lastIndexOf("open") + 1), ["closed"]);
  await assert.rejects(c.request("GET", "/v1/me"), (err) => err.status === 401);
});

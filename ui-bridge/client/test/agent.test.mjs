// The agent in a box, through companion: connect, fetch, conversations,
// the stream's agent counts, and a paused box woken by connect.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompanionError } from "../companion.js";
import { account, newClient, poll, removeWorkspace, waitEvent, waitState } from "./env.mjs";

// An agent the agent-server accepts; the emulator in the test boxes runs
// no model, so any will do.
export const agentSpec = { kind: "Agent", llm: { model: "test-model", usage_id: "agent" }, tools: [] };

/** A running Docker workspace for one test, deleted after it. */
export async function runningWorkspace(t, c, name) {
  await c.connect();
  const w = await c.createWorkspace({ account_id: account, name });
  t.after(() => removeWorkspace(c, w.id).catch(() => {}));
  await waitState(c, w.id, "running", 120000);
  return w;
}

test("connect, fetch and the box's conversations, page by page", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent");
  const agent = c.agent(w.id);

  const conn = await agent.connect();
  assert.equal(conn.woke, false, "a running box is not woken");
  assert.equal(conn.workspace.id, w.id);
  assert.equal(conn.workspace.state, "running");
  assert.equal(conn.agentPath, `/v1/workspaces/${w.id}/agent`);

  // fetch is fetch: a Response, whatever the status.
  const info = await agent.fetch("/server_info");
  assert.equal(info.status, 200);
  assert.equal(typeof (await info.json()).version, "string");
  const missing = await agent.fetch("/api/conversations/00000000-0000-4000-8000-000000000000");
  assert.equal(missing.status, 404, "the agent-server's own 404 comes through");

  const first = await agent.startConversation({ agent: agentSpec, title: "first through the client" });
  assert.match(first.id, /^[0-9a-f-]{36}$/);
  assert.equal(first.title, "first through the client");
  // A raw fetch can send anything the agent-server takes.
  const r = await agent.fetch("/api/conversations", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ agent: agentSpec, title: "second through the client" }),
  });
  assert.equal(r.status, 201);
  const second = await r.json();

  const all = await agent.conversations();
  assert.deepEqual(new Set(all.items.map((x) => x.title)), new Set([first.title, second.title]));
  assert.equal(all.next_page_id, null);
  for (const x of all.items) {
    assert.equal(typeof x.execution_status, "string");
    assert.ok(Date.parse(x.updated_at) > 0, `updated_at ${x.updated_at}`);
  }

  // One page unless asked for all of them.
  const one = await agent.conversations({ limit: 1, sortOrder: "CREATED_AT" });
  assert.equal(one.items.length, 1);
  assert.equal(one.items[0].id, first.id, "oldest first");
  assert.ok(one.next_page_id, "a next page is announced");
  const rest = await agent.conversations({ limit: 1, sortOrder: "CREATED_AT", pageId: one.next_page_id });
  assert.equal(rest.items[0].id, second.id);
  const every = await agent.conversations({ limit: 1, sortOrder: "CREATED_AT", all: true });
  assert.deepEqual(every.items.map((x) => x.id), [first.id, second.id]);
  assert.equal(every.next_page_id, null);

  // The agent-server's refusals are CompanionErrors with its detail.
  await assert.rejects(agent.conversations({ limit: 1000 }), (e) =>
    e instanceof CompanionError && e.status === 422 && e.code === "http_422" && /limit/.test(e.message));
  // companion's own: an unknown workspace.
  await assert.rejects(c.agent("ws_nope").conversations(), (e) => e.status === 404 && e.code === "not_found");
});

test("a paused box: requests are refused until connect wakes it", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent paused");
  const agent = c.agent(w.id);
  const started = await agent.startConversation({ agent: agentSpec, title: "before the pause" });

  await c.pauseWorkspace(w.id);
  await waitState(c, w.id, "paused", 120000);
  await assert.rejects(agent.conversations(), (e) =>
    e instanceof CompanionError && e.status === 409 && e.state === "paused" && /connect/.test(e.message));

  const conn = await agent.connect();
  assert.equal(conn.woke, true, "connect resumed the box");
  assert.equal(conn.workspace.state, "running");
  const { items } = await agent.conversations();
  assert.ok(items.some((x) => x.id === started.id && x.title === "before the pause"), "the conversation survived the pause");
});

test("connect waits for a workspace that is still being created", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  await c.connect();
  const w = await c.createWorkspace({ account_id: account, name: "js agent creating" });
  t.after(() => removeWorkspace(c, w.id).catch(() => {}));
  assert.equal(w.state, "creating");
  const conn = await c.agent(w.id).connect();
  assert.equal(conn.workspace.state, "running");
  assert.equal(conn.woke, false);
});

test("the stream counts open agent connections per workspace", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent counts");
  const agent = c.agent(w.id);
  assert.equal(c.agentConnections(w.id), 0);
  // A request held open (a body that has not finished arriving) is one
  // connection until it ends.
  let finish;
  const body = new ReadableStream({
    start(ctl) {
      ctl.enqueue(new TextEncoder().encode('{"agent":'));
      finish = () => {
        ctl.enqueue(new TextEncoder().encode(JSON.stringify(agentSpec) + ',"title":"slow"}'));
        ctl.close();
      };
    },
  });
  const seen = waitEvent(c, "agent", (e) => e.id === w.id && e.connections === 1, "an agent message with 1 connection", 20000);
  const pending = agent.fetch("/api/conversations", { method: "POST", headers: { "Content-Type": "application/json" }, body, duplex: "half" });
  await seen;
  assert.equal(c.agentConnections(w.id), 1);
  const closed = waitEvent(c, "agent", (e) => e.id === w.id && e.connections === 0, "the count back to 0", 20000);
  finish();
  assert.equal((await pending).status, 201);
  await closed;
  assert.equal(c.agentConnections(w.id), 0);
  await poll("the slow conversation listed", async () => (await agent.conversations()).items.some((x) => x.title === "slow"));
});

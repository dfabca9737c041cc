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

/** The next event of it for which pred is true; fails after ms. */
async function nextWhere(it, pred, what, ms = 20000) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    for (;;) {
      const r = await Promise.race([it.next(), timeout]);
      assert.ok(!r.done, `the events ended while waiting for ${what}`);
      if (pred(r.value)) return r.value;
    }
  } finally {
    clearTimeout(timer);
  }
}

test("a conversation's events: past ones, a message sent, resend from a time, a normal close", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent events");
  const agent = c.agent(w.id);
  const conv = await agent.startConversation({ agent: agentSpec, title: "events" });

  const events = agent.events(conv.id, { resend: true });
  await events.opened;
  const state = await nextWhere(events, () => true, "the first event");
  assert.equal(state.kind, "ConversationStateUpdateEvent", "a socket starts with the conversation's state");
  const prompt = await nextWhere(events, (e) => e.kind === "SystemPromptEvent", "the resent system prompt");
  assert.ok(prompt.id && prompt.timestamp, "events carry an id and a time");
  await waitEvent(c, "agent", (e) => e.id === w.id && e.connections === 1, "the socket counted on the stream");

  events.send("hello through companion");
  const said = await nextWhere(events, (e) => e.kind === "MessageEvent", "the message as an event");
  assert.equal(said.source, "user");
  assert.equal(said.llm_message.content[0].text, "hello through companion");

  // close() ends the loop without an error; the count goes back to 0.
  const gone = waitEvent(c, "agent", (e) => e.id === w.id && e.connections === 0, "the count back to 0");
  events.close();
  assert.deepEqual(await events.next(), { value: undefined, done: true }, "a closed stream is done");
  await gone;

  // From a time: the events at or after it, that one included. Breaking
  // out of the loop closes the socket.
  const again = agent.events(conv.id, { resend: said.timestamp });
  let resent;
  for await (const e of again) {
    if (e.kind === "MessageEvent") {
      resent = e;
      break;
    }
  }
  assert.equal(resent.id, said.id);
  assert.deepEqual(await again.next(), { value: undefined, done: true });
  await poll("the socket closed", () => c.agentConnections(w.id) === 0);
});

test("events: an unknown conversation is 4004, a paused box is companion's 409, a pause ends an open socket", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent events ends");
  const agent = c.agent(w.id);

  const unknown = agent.events("00000000-0000-4000-8000-000000000000");
  await assert.rejects(unknown.next(), (e) => e instanceof CompanionError && e.code === "conversation_not_found" &&
    e.status === 404 && e.details.close_code === 4004);
  assert.deepEqual(await unknown.next(), { value: undefined, done: true }, "the error is thrown once");

  // A pause stops the agent-server, which closes its sockets with 1012
  // (4013 when a box dies without closing them).
  const conv = await agent.startConversation({ agent: agentSpec, title: "paused under it" });
  const events = agent.events(conv.id);
  await events.opened;
  await nextWhere(events, (e) => e.kind === "ConversationStateUpdateEvent", "the state");
  await c.pauseWorkspace(w.id);
  await assert.rejects(nextWhere(events, () => false, "the end", 60000), (e) =>
    e instanceof CompanionError && e.code === "agent_gone" && /connect\(\) again/.test(e.message) && [1012, 4013].includes(e.details.close_code));
  await waitState(c, w.id, "paused", 120000);

  // Opening on a paused box: the handshake is refused, and the client
  // says why (companion's 409 naming connect), not just "failed".
  await assert.rejects(agent.events(conv.id).next(), (e) => e instanceof CompanionError && e.status === 409 && /connect/.test(e.message));
  await agent.connect();
  const after = agent.events(conv.id, { resend: true });
  t.after(() => after.close());
  await nextWhere(after, (e) => e.kind === "SystemPromptEvent", "the events after the wake");
});

test("socket(): any agent-server socket, here bash events, with the token as a header (Node)", async (t) => {
  const c = newClient();
  t.after(() => c.close());
  const w = await runningWorkspace(t, c, "js agent bash");
  const ws = await c.agent(w.id).socket("/sockets/bash-events");
  t.after(() => ws.close());
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("the bash socket did not open"));
  });
  assert.equal(ws.protocol, "", "the agent-server chooses no subprotocol");
  const output = new Promise((resolve) => {
    ws.onmessage = (ev) => {
      const e = JSON.parse(ev.data);
      if (e.kind === "BashOutput" && (e.stdout || "").includes("hi from the socket")) resolve(e);
    };
  });
  ws.send(JSON.stringify({ command: "echo hi from the socket" }));
  const out = await output;
  assert.equal(out.exit_code, 0);
});

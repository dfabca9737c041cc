// The guide for Electron (docs/desktop.md), run as written: the JavaScript code blocks
// of its section "The JavaScript client (and a guide for Electron)", one
// after the other as one module, with stand-ins for what Electron gives
// (win, app) and for what the reader fills in (companionPath,
// agentSettings). e2e/jsclient_test.go (TestJSClientGuide) passes, in the
// environment, COMPANION_BIN: companion with that test's Docker image and
// scope, and a data dir of its own (XDG_CONFIG_HOME).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const heading = "## The JavaScript client (and a guide for Electron)";

/** The guide's code: every ```js block of its section, in order. */
function guideCode(readme) {
  const start = readme.indexOf(heading);
  assert.ok(start >= 0, `docs/desktop.md has no section "${heading}"`);
  const end = readme.indexOf("\n## ", start + heading.length);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).join("\n");
}

/** Calls check until it returns a truthy value, up to ms. */
async function poll(what, check, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the Electron guide runs as written", async (t) => {
  const bin = process.env.COMPANION_BIN;
  if (!bin) throw new Error("COMPANION_BIN is not set: run this through e2e/jsclient_test.go (go test ./e2e -run TestJSClientGuide)");
  const readme = await readFile(new URL("../../../../docs/desktop.md", import.meta.url), "utf8");
  const code = guideCode(readme);
  assert.match(code, /agent\.events\(/, "the guide opens a conversation's events");

  // The guide imports the client from beside it.
  const client = new URL("../../companion.js", import.meta.url).href;
  const module = `const { companionPath, agentSettings, win, app } = globalThis.guide;\n` +
    code.replaceAll(`"./companion.js"`, JSON.stringify(client)) +
    `\nexport { child, client, conversation };\n`;
  const file = join(await mkdtemp(join(tmpdir(), "companion-guide-")), "main.mjs");
  await writeFile(file, module);

  const sent = []; // what the guide sends to the window
  const quit = [];
  globalThis.guide = {
    companionPath: bin,
    agentSettings: { kind: "Agent", llm: { model: "test-model", usage_id: "agent" }, tools: [] },
    win: { webContents: { send: (channel, value) => sent.push({ channel, value }) } },
    app: { on: (event, fn) => event === "before-quit" && quit.push(fn) },
  };
  const guide = await import(pathToFileURL(file).href);
  t.after(() => {
    // if the test fails before the guide quits
    guide.client.close();
    guide.child.kill();
  });

  assert.equal(guide.conversation.title, "demo", "a new box has no conversation: the guide starts one");
  assert.ok(sent.some((s) => s.channel === "workspaces" && s.value.some((w) => w.name === "demo")), "the window got the workspaces");
  const errors = () => sent.filter((s) => s.channel === "agent-closed").map((s) => s.value.message).join("; ");
  await poll("the conversation's first event in the window", () =>
    sent.find((s) => s.channel === "agent-event" && s.value.kind === "SystemPromptEvent"), 30000)
    .catch((err) => assert.fail(`${err.message}; the guide reported: ${errors() || "nothing"}`));

  // Quitting as the guide does ends companion cleanly, and the open
  // events socket with 1001, which the guide tells the window.
  const exited = new Promise((resolve) => guide.child.once("exit", resolve));
  assert.equal(quit.length, 1, "the guide quits on before-quit");
  quit[0]();
  assert.equal(await exited, 0, "companion exits 0");
  const closed = await poll("the socket's end in the window", () => sent.find((s) => s.channel === "agent-closed"), 10000);
  assert.equal(closed.value.code, "going_away", closed.value.message);
});

// Shared set-up of the client's tests. e2e/jsclient_test.go starts a real
// companion and passes, in the environment:
//   COMPANION_URL      companion's URL (the ready line's url)
//   COMPANION_TOKEN    its token at the start
//   COMPANION_CONTROL  the Go test's control server: GET /ready answers the
//                      current ready line, POST /restart restarts companion
//                      on the same data dir and port (with a new token)
//   COMPANION_ACCOUNT  the account to create workspaces in
import { CompanionClient } from "../companion.js";

export const url = need("COMPANION_URL");
export const account = need("COMPANION_ACCOUNT");
const control = process.env.COMPANION_CONTROL || "";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through e2e/jsclient_test.go (go test ./e2e -run TestJSClient)`);
  return v;
}

/** The current token: companion makes a new one when it restarts. */
export async function currentToken() {
  if (!control) return need("COMPANION_TOKEN");
  const r = await fetch(control + "/ready");
  if (!r.ok) throw new Error(`control server: GET /ready: ${r.status}`);
  return (await r.json()).token;
}

/** Asks the Go side to restart companion; resolves with the new ready line. */
export async function restartCompanion() {
  if (!control) throw new Error("COMPANION_CONTROL is not set");
  const r = await fetch(control + "/restart", { method: "POST" });
  if (!r.ok) throw new Error(`control server: POST /restart: ${r.status}`);
  return r.json();
}

/** A client that asks for the current token before every request, with short backoff. */
export function newClient(extra = {}) {
  return new CompanionClient({ baseUrl: url, token: currentToken, backoffInitialMs: 100, backoffMaxMs: 2000, ...extra });
}

/**
 * Resolves with the first event of type for which pred is true; rejects
 * after ms (a test that waits forever tells nothing).
 */
export function waitEvent(client, type, pred, what, ms = 60000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    const off = client.on(type, (ev) => {
      if (pred(ev)) {
        clearTimeout(timer);
        off();
        resolve(ev);
      }
    });
  });
}

/** Waits until the client's copy of workspace id is in state. */
export function waitState(client, id, state, ms = 60000) {
  const w = client.workspace(id);
  if (w && w.state === state) return Promise.resolve(w);
  return waitEvent(client, "change", () => client.workspace(id)?.state === state, `workspace ${id} ${state}`, ms).then(() =>
    client.workspace(id),
  );
}

/** Calls check until it returns a truthy value (growing waits, up to ms). */
export async function poll(what, check, ms = 60000) {
  const deadline = Date.now() + ms;
  let wait = 20;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 500);
  }
}

/**
 * Deletes a workspace a test made: preview, then confirm. A workspace that
 * changed between the two (a reconcile pass saw fresh activity) answers 409
 * "preview again", which is what a person would then do.
 */
export async function removeWorkspace(client, id) {
  for (let i = 0; ; i++) {
    const p = await client.previewDelete(id);
    try {
      return await client.deleteWorkspace(id, p.token);
    } catch (err) {
      if (i >= 4 || err.status !== 409 || !/preview again/.test(err.message)) throw err;
    }
  }
}

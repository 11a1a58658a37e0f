// Long-polls (`wait`) against a real server: ended by a signal, by expiry, by ForceComplete,
// cancelled by an AbortSignal, and re-sent after UNAVAILABLE across a server restart.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, CancelledError, UnavailableError, InvalidArgumentError } = client;

let server;
let c;
before(async () => {
  server = await startServer();
  c = new PurgatoryClient(server.target);
});
after(async () => {
  c.close();
  await server.stop();
});

test("a long-poll is answered when a signal completes it", async () => {
  const waiting = c.wait(["lp-signal"], 10_000, { payload: "p1" });
  await untilPending(1);
  assert.equal(await c.checkAndComplete("lp-signal", { amount: 5, source: "r1", data: "x" }), 1);
  const status = await waiting;
  assert.equal(status.state, "COMPLETED");
  assert.equal(status.created, true);
  assert.equal(status.result.amountSum, 5);
  assert.deepEqual(status.result.sources, ["r1"]);
  assert.equal(status.result.data.toString(), "x");
  assert.equal(status.payload.toString(), "p1");
  assert.ok(status.sequence >= 1);
  assert.match(status.operationId, /^[0-9a-f-]{36}$/); // made up by the client for re-sends
});

test("a long-poll nobody signals expires after its timeout", async () => {
  const started = Date.now();
  const status = await c.wait(["lp-expire"], 300, { operationId: "expire-1" });
  const took = Date.now() - started;
  assert.equal(status.state, "EXPIRED");
  assert.equal(status.operationId, "expire-1");
  assert.equal(status.result.signalCount, 0);
  assert.ok(took >= 250, `answered after ${took} ms, before the 300 ms timeout`);
  assert.ok(took < 5_000, `answered after ${took} ms`);
  assert.ok(status.completeTimeMs >= status.dueTimeMs - 5);
});

test("ForceComplete ends a waiting long-poll (the cancel of a delayed message)", async () => {
  const waiting = c.wait(["lp-force"], 60_000, { operationId: "force-1" });
  await untilPending(1);
  const forced = await c.forceComplete("force-1");
  assert.equal(forced.completed, true);
  assert.equal(forced.operation.state, "FORCE_COMPLETED");
  assert.equal((await waiting).state, "FORCE_COMPLETED");
  const again = await c.forceComplete("force-1");
  assert.equal(again.completed, false, "only the call that ended it reports completed");
  assert.equal((await c.getOperation("force-1")).state, "FORCE_COMPLETED");
});

test("tryCompleteElseWatch without wait answers at once, and a re-send is idempotent", async () => {
  const first = await c.tryCompleteElseWatch(["lp-nowait"], 60_000, { operationId: "nw-1" });
  assert.equal(first.state, "WATCHING");
  assert.equal(first.created, true);
  const again = await c.tryCompleteElseWatch(["lp-nowait"], 60_000, { operationId: "nw-1" });
  assert.equal(again.created, false);
  await c.forceComplete("nw-1");
});

test("aborting the AbortSignal cancels the long-poll, not the operation", async () => {
  const abort = new AbortController();
  const waiting = c.wait(["lp-abort"], 60_000, { operationId: "abort-1", signal: abort.signal });
  await untilPending(1);
  abort.abort();
  await assert.rejects(waiting, CancelledError);
  assert.equal((await c.getOperation("abort-1")).state, "WATCHING");
  await c.forceComplete("abort-1");
});

test("wait does not re-send what the server refused", async () => {
  await assert.rejects(c.wait([""], 1000), InvalidArgumentError);
});

test("wait re-sends the same operation after UNAVAILABLE, across a server restart", async () => {
  const toml = `
grace_s = 0.2
log_level = "WARNING"
[[purgatories]]
name = "d"
durable = true
`;
  const first = await startServer({ toml });
  const restartable = { ...first };
  const rc = new PurgatoryClient(first.target, {
    purgatory: "d",
    retry: { attempts: 60, initialDelayMs: 20, maxDelayMs: 200 },
  });
  let second;
  try {
    const waiting = rc.wait(["lp-restart"], 60_000, { operationId: "restart-1" });
    await until(async () => (await rc.getPurgatory()).pending === 1);
    await restartable.stop(); // the waiting long-poll ends with UNAVAILABLE: wait re-sends
    second = await startServer({ toml, listen: first.target, dataDir: first.dataDir });
    await until(async () => (await rc.getPurgatory()).pending === 1);
    assert.equal(await rc.checkAndComplete("lp-restart"), 1);
    const status = await waiting;
    assert.equal(status.state, "COMPLETED");
    assert.equal(status.operationId, "restart-1");
    assert.equal(status.created, false, "the re-send found the recovered operation");
  } finally {
    rc.close();
    await second?.stop();
  }
});

test("without retries UNAVAILABLE surfaces", async () => {
  const gone = await startServer();
  await gone.stop();
  const rc = new PurgatoryClient(gone.target, { retry: { attempts: 0 } });
  try {
    await assert.rejects(rc.wait(["k"], 1000), UnavailableError);
  } finally {
    rc.close();
  }
});

async function until(predicate, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await predicate()) return;
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
    }
    if (Date.now() > end) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

function untilPending(n) {
  return until(async () => (await c.getPurgatory()).pending === n);
}

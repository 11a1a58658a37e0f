// Session streams and watchMany against a real server: frames and acknowledgements,
// refused frames, outcomes as they end, heartbeats and the dead-stream deadline, and
// watchMany resumed after a cut (a durable server's restart) without registering any
// operation twice or yielding any outcome twice.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, InvalidArgumentError, UnavailableError, Condition } =
  client;

let server;
let c;
before(async () => {
  server = await startServer();
  c = new PurgatoryClient(server.target, { deadlineMs: 10_000 });
});
after(async () => {
  c.close();
  await server.stop();
});

async function until(predicate, ms = 15_000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await predicate()) return;
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
    }
    if (Date.now() > end) throw new Error(`timed out: ${predicate}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const specs = (n, prefix, timeoutMs = 60_000) =>
  Array.from({ length: n }, (_, i) => ({
    keys: [`${prefix}${i}`],
    timeoutMs,
    operationId: `${prefix}${i}`,
  }));

test("a batch's and a session's statuses carry the payloads sent (the server echoes none)", async () => {
  const sent = [
    { keys: ["pay-b0"], timeoutMs: 60_000, operationId: "pay-b0", payload: "order-17" },
    { keys: ["pay-b1"], timeoutMs: 60_000, operationId: "pay-b1" },
    { keys: ["pay-b2"], timeoutMs: 60_000, operationId: "pay-b2", payload: Buffer.from([1, 2]) },
  ];
  const statuses = await c.batchTryCompleteElseWatch(sent);
  assert.deepEqual(
    statuses.map((s) => [s.operationId, s.payload.toString("hex")]),
    [["pay-b0", Buffer.from("order-17").toString("hex")], ["pay-b1", ""], ["pay-b2", "0102"]],
  );
  const session = c.session();
  try {
    const ack = await session.send({
      watches: [{ keys: ["pay-s0"], timeoutMs: 60_000, operationId: "pay-s0", payload: "s-17" }],
    });
    assert.deepEqual(ack.operations.map((s) => [s.operationId, s.payload.toString()]), [
      ["pay-s0", "s-17"],
    ]);
  } finally {
    await session.close();
  }
});

test("a session acknowledges each frame and streams each outcome as it ends", async () => {
  const session = c.session();
  try {
    const ack = await session.send({ watches: specs(3, "s"), signals: ["s1"] });
    assert.equal(ack.error, null);
    assert.deepEqual(ack.operations.map((s) => [s.operationId, s.created]), [
      ["s0", true],
      ["s1", true],
      ["s2", true],
    ]);
    assert.deepEqual(ack.completedPerSignal, [1]);
    // A re-send registers nothing new; a force-complete says whether it ended the operation.
    const again = await session.send({ watches: specs(1, "s"), forceComplete: ["s2", "s1"] });
    assert.equal(again.operations[0].created, false);
    assert.deepEqual(again.forceCompleted, [true, false]);
    // A refused frame changes nothing and the stream goes on.
    const bad = await session.send({ watches: [{ keys: [""], timeoutMs: 100 }] });
    assert.ok(bad.error instanceof InvalidArgumentError, String(bad.error));
    await c.checkAndComplete("s0");
    session.doneWriting();
    const ended = [];
    for await (const event of session.outcomes()) ended.push([event.operationId, event.state]);
    assert.deepEqual(ended, [
      ["s1", "COMPLETED"],
      ["s2", "FORCE_COMPLETED"],
      ["s0", "COMPLETED"],
    ]);
    assert.equal(session.finished, true);
    assert.equal(session.error, undefined);
  } finally {
    await session.close();
  }
});

test("heartbeats are counted; a silent stream is treated as dead past deadAfterMs", async () => {
  assert.throws(() => c.session({ deadAfterMs: 100 }), InvalidArgumentError);
  const own = await startServer();
  const oc = new PurgatoryClient(own.target, { deadlineMs: 5_000 });
  // deadAfterMs well above the interval: a loaded machine may delay a heartbeat or two.
  const session = oc.session({ heartbeatIntervalMs: 100, deadAfterMs: 1_500 });
  try {
    await session.send({ watches: specs(1, "h") });
    await until(() => session.liveness.heartbeats >= 2, 5_000);
    assert.ok(Math.abs(session.liveness.serverTimeMs - Date.now()) < 5_000);
    assert.equal(session.finished, false);
    // The server stops answering (SIGSTOP: the connection stays open, nothing comes).
    process.kill(own.pid, "SIGSTOP");
    const t0 = Date.now();
    await session.ended;
    assert.ok(Date.now() - t0 < 8_000);
    assert.ok(session.error instanceof UnavailableError, String(session.error));
    assert.match(session.error.message, /treated as dead/);
    await assert.rejects(session.send({}), UnavailableError);
  } finally {
    process.kill(own.pid, "SIGCONT");
    await session.close();
    oc.close();
    await own.stop();
  }
});

test("watchMany yields each outcome as it ends and throws a refused frame's error", async () => {
  const got = [];
  const ops = [
    { keys: ["w-a"], timeoutMs: 30, operationId: "w-early" },
    { keys: ["w-b"], timeoutMs: 60_000, condition: Condition.allKeys() },
    { keys: ["w-b"], timeoutMs: 60_000 },
  ];
  const purgatory = "wmany";
  await c.createPurgatory(purgatory);
  for await (const event of c.watchMany(ops, { frameSize: 1, purgatory })) {
    got.push(event);
    if (got.length === 1) {
      await until(async () => (await c.getPurgatory(purgatory)).pending === 2);
      await c.checkAndComplete("w-b", undefined, { purgatory });
    }
  }
  assert.equal(got[0].operationId, "w-early");
  assert.equal(got[0].state, "EXPIRED");
  assert.deepEqual(got.slice(1).map((e) => e.state), ["COMPLETED", "COMPLETED"]);
  assert.ok(got.slice(1).every((e) => e.operationId.startsWith("wm-")));
  await assert.rejects(
    (async () => {
      for await (const _ of c.watchMany([{ keys: [""], timeoutMs: 100 }]));
    })(),
    InvalidArgumentError,
  );
  await assert.rejects(
    (async () => {
      for await (const _ of c.watchMany([...specs(1, "dup"), ...specs(1, "dup")]));
    })(),
    InvalidArgumentError,
  );
});

test("watchMany re-opened after a cut registers nothing twice and yields each outcome once", async () => {
  const toml = `
grace_s = 0.2
log_level = "WARNING"
[[purgatories]]
name = "wm"
durable = true
retained_events = 1000
`;
  const first = await startServer({ toml });
  const dc = new PurgatoryClient(first.target, {
    purgatory: "wm",
    deadlineMs: 5_000,
    resume: { attempts: 60, initialDelayMs: 20, maxDelayMs: 200 },
  });
  let second;
  try {
    const n = 20;
    const seen = new Map();
    const events = dc.watchMany(specs(n, "r"), { frameSize: 5 });
    const next = async () => {
      const { value, done } = await events.next();
      assert.equal(done, false);
      assert.ok(!seen.has(value.operationId), `${value.operationId} twice`);
      seen.set(value.operationId, value.state);
    };
    let pending = next(); // starts the stream
    await until(async () => (await dc.getPurgatory()).pending === n);
    for (let i = 0; i < 5; i++) {
      await dc.checkAndComplete(`r${i}`);
      await pending;
      pending = i < 4 ? next() : undefined;
    }
    // The cut: the server goes away with 15 watches open, and comes back.
    pending = next();
    await first.stop();
    second = await startServer({ toml, listen: first.target, dataDir: first.dataDir });
    await until(async () => (await dc.getPurgatory()).pending === n - 5);
    await dc.batchCheckAndComplete(Array.from({ length: n - 5 }, (_, i) => `r${i + 5}`));
    await pending;
    while (seen.size < n) await next();
    assert.equal((await events.next()).done, true);
    assert.equal(seen.size, n);
    assert.deepEqual(new Set(seen.values()), new Set(["COMPLETED"]));
    // Every operation was registered once: one outcome each in the purgatory's history.
    const info = await dc.getPurgatory();
    assert.equal(info.pending, 0);
    assert.equal(info.lastSequence, n);
    const history = [];
    for await (const event of dc.subscribe({ afterSequence: 0 })) {
      history.push(event.operationId);
      if (history.length === n) break;
    }
    assert.equal(new Set(history).size, n);
  } finally {
    dc.close();
    await (second ?? first).stop();
  }
});

test("subscribe yields heartbeats and gives up on a stream silent past deadAfterMs", async () => {
  const own = await startServer();
  const oc = new PurgatoryClient(own.target, { deadlineMs: 5_000 });
  try {
    await oc.wait([], 5, { operationId: "x1" });
    const stream = oc.subscribe({
      afterSequence: 0,
      heartbeatIntervalMs: 100,
      deadAfterMs: 1_500,
      resume: { attempts: 0 },
    });
    const first = (await stream.next()).value;
    assert.deepEqual([first.operationId, first.heartbeat], ["x1", false]);
    const beat = (await stream.next()).value;
    assert.equal(beat.heartbeat, true);
    assert.equal(beat.caughtUpSequence, 1);
    process.kill(own.pid, "SIGSTOP");
    await assert.rejects(
      (async () => {
        for (;;) if ((await stream.next()).done) return;
      })(),
      (err) => err instanceof UnavailableError && /treated as dead/.test(err.message),
    );
  } finally {
    process.kill(own.pid, "SIGCONT");
    oc.close();
    await own.stop();
  }
});

test("a session that stops reading is pushed back, not cut; reading again gets every outcome once", async () => {
  const toml = `
grace_s = 0.2
log_level = "WARNING"
[limits]
session_buffer = 16
max_payload_bytes = 65536
[defaults]
max_pending = 10000
retained_events = 100
`;
  const own = await startServer({ toml });
  const oc = new PurgatoryClient(own.target, { deadlineMs: 10_000 });
  try {
    const n = 200;
    const payload = Buffer.alloc(60_000, 120); // 200 outcomes of 60 KB: more than HTTP/2 windows hold
    const ops = Array.from({ length: n }, (_, i) => ({
      keys: [`s${i}`],
      timeoutMs: 60_000,
      payload,
      operationId: `s${i}`,
    }));
    // outcomeBuffer 1: the reader stops after one outcome (nobody reads).
    const session = oc.session({ outcomeBuffer: 1 });
    for (let start = 0; start < n; start += 10) {
      assert.equal((await session.send({ watches: ops.slice(start, start + 10) })).error, null);
    }
    for (let i = 0; i < n; i++) await oc.checkAndComplete(`s${i}`);
    // The server holds back (it stops reading this stream's frames past session_buffer)
    // instead of cutting it: reading again, every outcome arrives, each once.
    const seen = new Set();
    for await (const event of session.outcomes()) {
      assert.ok(!seen.has(event.operationId));
      seen.add(event.operationId);
      if (seen.size === n) break;
    }
    assert.equal(seen.size, n);
    await session.close();
    assert.equal((await oc.getPurgatory()).pending, 0);
    assert.equal((await oc.getPurgatory()).lastSequence, n);
  } finally {
    oc.close();
    await own.stop();
  }
});

test("a slow consumer is not a silent stream; closing a session with a full queue returns", async () => {
  const purgatory = "slow";
  await c.createPurgatory(purgatory);
  await c.wait([], 5, { operationId: "slow-1", purgatory });
  const stream = c.subscribe({
    purgatory,
    afterSequence: 0,
    heartbeatIntervalMs: 100,
    deadAfterMs: 800,
    resume: { attempts: 0 }, // a stream taken for dead would throw
  });
  assert.equal((await stream.next()).value.operationId, "slow-1");
  await new Promise((r) => setTimeout(r, 1_500)); // busy with the event, past deadAfterMs
  assert.equal((await stream.next()).value.heartbeat, true);
  await stream.return();

  const session = c.session({ purgatory, outcomeBuffer: 1 });
  await session.send({ watches: specs(3, "full", 5) });
  await until(async () => (await c.getPurgatory(purgatory)).pending === 0);
  await new Promise((r) => setTimeout(r, 100)); // the reader waits for room in the queue
  let timer;
  const closed = await Promise.race([
    session.close().then(() => "closed"),
    new Promise((r) => (timer = setTimeout(() => r("hung"), 5_000))),
  ]);
  clearTimeout(timer);
  assert.equal(closed, "closed");
});

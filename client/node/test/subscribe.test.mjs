// Subscriptions: order, filters, resume across a slow-subscriber cut-off and across a
// durable server's restart, with no event skipped or repeated.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const {
  PurgatoryClient,
  OutOfRangeError,
  SlowSubscriberError,
  StreamResetError,
  FailedPreconditionError,
  UnavailableError,
} = client;

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

/** The first `count` events of `stream` (then the stream is closed). */
async function take(stream, count) {
  const out = [];
  for await (const event of stream) {
    out.push(event);
    if (out.length >= count) break;
  }
  return out;
}

async function untilSubscribers(cl, n, purgatory) {
  for (let i = 0; i < 500; i++) {
    try {
      if ((await cl.getPurgatory(purgatory)).subscribers === n) return;
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`never ${n} subscribers`);
}

/** Register `n` operations on keys prefix0..n-1, then complete them all in ONE call. */
async function completeInOneTurn(cl, prefix, n, purgatory) {
  const specs = Array.from({ length: n }, (_, i) => ({
    keys: [`${prefix}${i}`],
    timeoutMs: 60_000,
    operationId: `${prefix}-op${i}`,
  }));
  await cl.batchTryCompleteElseWatch(specs, { purgatory });
  const done = await cl.batchCheckAndComplete(
    specs.map((s) => s.keys[0]),
    { purgatory },
  );
  assert.equal(done.completed, n);
}

test("events arrive in sequence order, live and replayed, with filters", async () => {
  const name = "order";
  await c.createPurgatory(name, { retainedEvents: 100 });
  const live = take(c.subscribe({ purgatory: name }), 3);
  await untilSubscribers(c, 1, name);
  await completeInOneTurn(c, "o", 3, name);
  const events = await live;
  assert.deepEqual(events.map((e) => e.sequence), [1, 2, 3]);
  assert.deepEqual(events.map((e) => e.operationId), ["o-op0", "o-op1", "o-op2"]);
  assert.equal(events[0].state, "COMPLETED");
  assert.deepEqual(events[0].keys, ["o0"]);

  const replay = await take(c.subscribe({ purgatory: name, afterSequence: 1 }), 2);
  assert.deepEqual(replay.map((e) => e.sequence), [2, 3]);
  const byKey = await take(c.subscribe({ purgatory: name, afterSequence: 0, keys: ["o2"] }), 1);
  assert.deepEqual(byKey.map((e) => e.operationId), ["o-op2"]);
  await c.forceComplete("x-forced", { purgatory: name }).catch(() => undefined);
  await c.tryCompleteElseWatch([], 60_000, { purgatory: name, operationId: "x-forced" });
  await c.forceComplete("x-forced", { purgatory: name });
  const byState = await take(
    c.subscribe({ purgatory: name, afterSequence: 0, states: ["FORCE_COMPLETED"] }),
    1,
  );
  assert.deepEqual(byState.map((e) => [e.sequence, e.operationId]), [[4, "x-forced"]]);
  const byPrefix = await take(
    c.subscribe({ purgatory: name, afterSequence: 0, operationIdPrefix: "x-" }),
    1,
  );
  assert.equal(byPrefix[0].operationId, "x-forced");
  await c.deletePurgatory(name);
});

test("a slow subscriber is cut off (buffer of 4) and the error says where to resume", async () => {
  const name = "cut";
  await c.createPurgatory(name);
  const strict = new PurgatoryClient(server.target, { purgatory: name, resume: { attempts: 0 } });
  try {
    const stream = strict.subscribe();
    const got = [];
    // The error is caught as soon as it happens (an unobserved rejection fails the test).
    const reading = (async () => {
      for await (const event of stream) got.push(event.sequence);
    })().then(() => null, (err) => err);
    await untilSubscribers(strict, 1);
    await completeInOneTurn(strict, "s", 12);
    const error = await reading;
    assert.ok(error instanceof SlowSubscriberError, `got ${error}`);
    // All twelve outcomes came in one server loop turn: the buffer (1..4, not yet handed
    // to the transport) is dropped at the cut and the stream ends at what it had sent.
    assert.deepEqual(got, []);
    assert.equal(error.resumeAfter, 0);
  } finally {
    strict.close();
    await c.deletePurgatory(name);
  }
});

test("subscribe resumes after the cut-off without a gap or a duplicate", async () => {
  const name = "resume";
  await c.createPurgatory(name);
  const stream = c.subscribe({ purgatory: name }); // from now on: position from the header
  const reading = take(stream, 40);
  await untilSubscribers(c, 1, name);
  await completeInOneTurn(c, "a", 20, name); // overflows the 4-event buffer at once
  await completeInOneTurn(c, "b", 20, name); // and again, after the resume
  const events = await reading;
  assert.deepEqual(
    events.map((e) => e.sequence),
    Array.from({ length: 40 }, (_, i) => i + 1),
  );
  await c.deletePurgatory(name);
});

test("subscribe resumes across a durable server's restart without a gap or a duplicate", async () => {
  const toml = `
grace_s = 0.2
log_level = "WARNING"
[[purgatories]]
name = "d"
durable = true
retained_events = 1000
`;
  const first = await startServer({ toml });
  const dc = new PurgatoryClient(first.target, {
    purgatory: "d",
    resume: { attempts: 60, initialDelayMs: 20, maxDelayMs: 200 },
  });
  let second;
  try {
    const before = (await dc.getPurgatory()).incarnation;
    const stream = dc.subscribe({ afterSequence: 0 });
    const got = [];
    const reading = (async () => {
      for await (const event of stream) {
        got.push(event);
        if (got.length === 10) break;
      }
    })();
    await untilSubscribers(dc, 1);
    for (let i = 0; i < 5; i++) await dc.wait([], 5, { operationId: `before-${i}` });
    await waitFor(() => got.length === 5);
    await first.stop(); // the stream ends with UNAVAILABLE; the client keeps resuming
    second = await startServer({ toml, listen: first.target, dataDir: first.dataDir });
    await untilSubscribers(dc, 1);
    for (let i = 0; i < 5; i++) await dc.wait([], 5, { operationId: `after-${i}` });
    await reading;
    assert.deepEqual(got.map((e) => e.sequence), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.deepEqual(new Set(got.map((e) => e.incarnation)), new Set([before]));
    // The resumes sent the stream's incarnation: a durable purgatory keeps it.
    assert.equal((await dc.getPurgatory()).incarnation, before);
  } finally {
    dc.close();
    await second?.stop();
  }
});

test("after an in-memory server's restart, resuming is StreamResetError, not a wrong replay", async () => {
  const toml = 'grace_s = 0.2\nlog_level = "WARNING"\n';
  const first = await startServer({ toml });
  const mc = new PurgatoryClient(first.target, {
    resume: { attempts: 60, initialDelayMs: 20, maxDelayMs: 200 },
  });
  let second;
  try {
    const before = (await mc.getPurgatory()).incarnation;
    assert.match(before, /^[0-9a-f]{16}$/);
    const stream = mc.subscribe({ afterSequence: 0 });
    const got = [];
    const reading = (async () => {
      for await (const event of stream) got.push(event.sequence);
    })().then(() => null, (err) => err);
    await untilSubscribers(mc, 1);
    for (let i = 0; i < 3; i++) await mc.wait([], 5, { operationId: `old-${i}` });
    await waitFor(() => got.length === 3);
    await first.stop();
    second = await startServer({ toml, listen: first.target });
    // The new incarnation has its own sequence 1..3: a resume "after 3" must not be
    // served from it (it would silently skip these), nor mixed with the old stream.
    for (let i = 0; i < 4; i++) await mc.wait([], 5, { operationId: `new-${i}` });
    const after = (await mc.getPurgatory()).incarnation;
    assert.notEqual(after, before);
    const error = await reading;
    assert.ok(error instanceof StreamResetError, `got ${error}`);
    assert.ok(error instanceof FailedPreconditionError);
    assert.equal(error.incarnation, after);
    assert.match(error.details, /incarnation/);
    assert.deepEqual(got, [1, 2, 3], "nothing from the new incarnation was yielded");

    // Starting afresh (no position) is the documented way on: it gets the new stream.
    const fresh = await take(mc.subscribe({ afterSequence: 0 }), 4);
    assert.deepEqual(fresh.map((e) => e.operationId), ["new-0", "new-1", "new-2", "new-3"]);
  } finally {
    mc.close();
    await second?.stop();
  }
});

test("a stored position with a stale incarnation is refused at once", async () => {
  const info = await c.getPurgatory();
  await c.wait([], 5, { operationId: "stale-check" });
  const stale = "0123456789abcdef";
  assert.notEqual(info.incarnation, stale);
  const err = await take(c.subscribe({ afterSequence: 0, incarnation: stale }), 1).then(
    () => null,
    (e) => e,
  );
  assert.ok(err instanceof StreamResetError, `got ${err}`);
  assert.equal(err.incarnation, info.incarnation);
  const ok = await take(c.subscribe({ afterSequence: 0, incarnation: info.incarnation }), 1);
  assert.equal(ok.length, 1);
});

test("resuming beyond what is retained is OutOfRangeError", async () => {
  await assert.rejects(take(c.subscribe({ afterSequence: 1_000_000 }), 1), OutOfRangeError);
});

async function waitFor(predicate, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

// Nack, ackBatch and a group's retry backoff against a real server: a Node consumer that
// nacks (with a delay, with the group's backoff, to a dead letter), acks many deliveries in
// one call with some of them stale (each answered on its own), and the fencing after a
// backoff (the next attempt's number still grows); ackBatch on the client's AckStream,
// which outlives a failed request and a server restart.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, FailedPreconditionError, InvalidArgumentError, NotFoundError } = client;

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

const publish = (purgatory, id) =>
  c.tryCompleteElseWatch([], 60_000, { operationId: id, purgatory }).then(() =>
    c.forceComplete(id, { purgatory }),
  );

test("nack: at once, after the group's backoff, to a dead letter; fenced", async () => {
  const purgatory = "n-basic";
  await c.createPurgatory(purgatory);
  const backoff = { type: "exponential", delayMs: 150, maxDelayMs: 1_000 };
  const stream = await c.joinGroup("workers", { purgatory, visibilityTimeoutMs: 60_000, backoff });
  const it = stream[Symbol.asyncIterator]();
  try {
    await publish(purgatory, "job-1");
    const first = (await it.next()).value;
    assert.equal(first.attempt, 1);
    const now = await first.nack({ delayMs: 0 });
    assert.equal(now.deadLetter, false);
    const second = (await it.next()).value;
    assert.deepEqual([second.sequence, second.attempt], [first.sequence, 2]);
    await assert.rejects(first.nack(), FailedPreconditionError); // lease lost
    const later = await second.nack(); // the backoff: 150 * 2^(2-1) = 300 ms
    assert.ok(later.redeliverAtMs >= Date.now() + 300 - 100);
    const third = (await it.next()).value;
    assert.ok(Date.now() >= later.redeliverAtMs - 20);
    assert.equal(third.attempt, 3);
    const [info] = await c.listGroups({ purgatory });
    assert.deepEqual(info.backoff, { type: "exponential", delayMs: 150, maxDelayMs: 1_000, jitter: 0 });
    assert.equal((await third.nack({ deadLetter: true })).deadLetter, true);
    // A nack of the dead letter changes nothing.
    assert.deepEqual(await c.nack("workers", third.sequence, { purgatory, attempt: 3 }), {
      deadLetter: true,
      redeliverAtMs: 0,
    });
    const page = await c.listDeadLetters("workers", { purgatory });
    assert.deepEqual(page.deadLetters.map((d) => d.attempt), [3]);
    await assert.rejects(
      c.nack("workers", third.sequence, { purgatory, delayMs: 5, deadLetter: true }),
      InvalidArgumentError,
    );
    await assert.rejects(
      c.joinGroup("workers", { purgatory, backoff: { type: "fixed", delayMs: 150 } }),
      FailedPreconditionError,
    );
  } finally {
    stream.close();
  }
});

test("ackBatch answers each entry: some stale, some unknown, the rest take effect", async () => {
  const purgatory = "n-batch";
  await c.createPurgatory(purgatory);
  const stream = await c.joinGroup("workers", { purgatory, visibilityTimeoutMs: 60_000 });
  const it = stream[Symbol.asyncIterator]();
  try {
    for (const id of ["b-1", "b-2", "b-3"]) await publish(purgatory, id);
    const got = [];
    for (let i = 0; i < 3; i++) got.push((await it.next()).value);
    const [one, two, three] = got.sort((a, b) => a.sequence - b.sequence);
    await two.nack({ delayMs: 0 });
    const twoAgain = (await it.next()).value;
    assert.equal(twoAgain.attempt, 2);
    const results = await c.ackBatch(
      "workers",
      [
        { sequence: one.sequence, attempt: 1 },
        { sequence: two.sequence, attempt: 1 }, // stale
        { sequence: 999_999 }, // never taken in
        { sequence: three.sequence, attempt: 1, nack: true, delayMs: 60_000 },
        twoAgain.sequence, // a bare sequence: an unfenced ack
      ],
      { purgatory },
    );
    assert.deepEqual(
      results.map((r) => [r.sequence, r.code, r.ok]),
      [
        [one.sequence, 0, true],
        [two.sequence, 9, false],
        [999_999, 5, false],
        [three.sequence, 0, true],
        [two.sequence, 0, true],
      ],
    );
    assert.match(results[1].message, /lease lost/);
    assert.ok(results[3].redeliverAtMs > Date.now() + 50_000);
    const [info] = await c.listGroups({ purgatory });
    assert.deepEqual([info.leased, info.retrying, info.ready, info.backoff], [0, 1, 0, null]);
  } finally {
    stream.close();
  }
});

/** A port free a moment ago (the metrics listener needs a fixed one). */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
    probe.on("error", reject);
  });
}

/** The server's count of finished calls of `method` (its call-duration histogram). */
async function callsOf(metricsPort, method) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const name = `rpc_method="purgatory.v1.PurgatoryService/${method}"`;
  return text
    .split("\n")
    .filter((line) => line.startsWith("rpc_server_call_duration_seconds_count{") && line.includes(name))
    .reduce((sum, line) => sum + Number(line.split(" ").pop()), 0);
}

test("ackBatch rides one AckStream: a failed request fails alone, a restart opens a new one", async () => {
  const metricsPort = await freePort();
  const own = await startServer({ args: ["--metrics-listen", `127.0.0.1:${metricsPort}`] });
  const listen = own.target;
  const dataDir = own.dataDir;
  let restarted;
  const k = new PurgatoryClient(listen, { deadlineMs: 10_000 });
  try {
    const stream = await k.joinGroup("workers", { prefetch: 8, visibilityTimeoutMs: 60_000 });
    const it = stream[Symbol.asyncIterator]();
    for (let i = 0; i < 6; i++) await k.tryCompleteElseWatch([], 60_000, { operationId: `s-${i}` });
    await k.cancel(undefined, { prefix: "s-" }); // six outcomes at once: delivered in one message
    const got = [];
    for (let i = 0; i < 6; i++) got.push((await it.next()).value);
    assert.deepEqual(got.map((d) => d.operationId), ["s-0", "s-1", "s-2", "s-3", "s-4", "s-5"]);
    const entries = got.map((d) => ({ sequence: d.sequence, attempt: d.attempt }));
    // Three requests in flight at once, the middle one for a group that does not exist.
    const [first, missing, last] = await Promise.allSettled([
      k.ackBatch("workers", entries.slice(0, 3)),
      k.ackBatch("nobody", entries.slice(3, 4)),
      k.ackBatch("workers", [...entries.slice(3), entries[0]]),
    ]);
    assert.deepEqual(first.value.map((r) => r.code), [0, 0, 0]);
    assert.ok(missing.reason instanceof NotFoundError, String(missing.reason));
    assert.match(missing.reason.message, /nobody/);
    assert.deepEqual(last.value.map((r) => r.code), [0, 0, 0, 5]); // the first was acked already
    assert.equal((await k.listGroups())[0].leased, 0);
    // The server counted the unary calls, and not one AckBatch: the acks went on the stream.
    assert.ok((await callsOf(metricsPort, "ListGroups")) >= 1);
    assert.equal(await callsOf(metricsPort, "AckBatch"), 0);
    stream.close();
    // A restart on the same port ends the stream; the next ackBatch is answered anyway.
    await own.stop();
    restarted = await startServer({ listen, dataDir });
    await assert.rejects(k.ackBatch("workers", [1]), NotFoundError); // in memory: no group now
  } finally {
    k.close();
    await own.stop();
    await restarted?.stop();
  }
});

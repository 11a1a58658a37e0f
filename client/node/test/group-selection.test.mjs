// A Node consumer of a worker group with a selection, against a real server: priorities
// (an urgent outcome overtakes the backlog), ordering keys together with priorities (one
// outcome per key in flight; priority between keys), a rate limit's sliding window, and
// the group listing's settings and the errors.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, FailedPreconditionError, InvalidArgumentError } = client;
const VIS = 5_000;

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

/** Ends operations now, in order (an id, or [id, key]): each becomes one outcome. */
async function publish(purgatory, ...ops) {
  for (const op of ops) {
    const [id, keys] = typeof op === "string" ? [op, []] : [op[0], [op[1]]];
    await c.tryCompleteElseWatch(keys, 60_000, { operationId: id, purgatory });
    await c.forceComplete(id, { purgatory });
  }
}

async function untilReady(purgatory, n) {
  const end = Date.now() + 10_000;
  for (;;) {
    const [info] = await c.listGroups({ purgatory });
    if (info.ready === n) return info;
    assert.ok(Date.now() < end, `ready ${info.ready}, waiting for ${n}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const URGENT = { priority: 10, operationIdPrefix: "urgent/" };

test("priorities and ordering keys together; the group lists its selection", async () => {
  const purgatory = "sel-order";
  await c.createPurgatory(purgatory);
  const selection = { priorities: [URGENT], orderingKey: { firstKey: true } };
  (await c.joinGroup("g", { purgatory, visibilityTimeoutMs: VIS, selection })).close();
  await publish(purgatory, ["r1", "k1"], ["urgent/1", "k1"], ["urgent/2", "k2"], "routine");
  await untilReady(purgatory, 4);
  const stream = await c.joinGroup("g", { purgatory, prefetch: 10 });
  try {
    const it = stream[Symbol.asyncIterator]();
    const got = [];
    for (let i = 0; i < 3; i++) got.push((await it.next()).value);
    // urgent/2 heads its key and outranks everything; r1 heads k1 (urgent/1 waits
    // behind it); "routine" has no key.
    assert.deepEqual(
      got.map((d) => [d.operationId, d.priority, d.orderingKey]),
      [["urgent/2", 10, "k2"], ["r1", 0, "k1"], ["routine", 0, ""]],
    );
    const info = await untilReady(purgatory, 1);
    assert.equal(info.leased, 3);
    assert.deepEqual(info.selection, {
      priorities: [{ priority: 10, operationIdPrefix: "urgent/", key: "" }],
      orderingKey: { firstKey: true },
    });
    await got[1].ack(); // r1 done: k1's next goes
    const next = (await it.next()).value;
    assert.deepEqual([next.operationId, next.orderingKey], ["urgent/1", "k1"]);
    await Promise.all([got[0].ack(), got[2].ack(), next.ack()]);
    await assert.rejects(
      c.joinGroup("g", { purgatory, selection: { priorities: [URGENT] } }),
      FailedPreconditionError,
    );
  } finally {
    stream.close();
  }
});

test("a rate limit bounds a Node consumer's deliveries per window", async () => {
  const purgatory = "sel-rate";
  await c.createPurgatory(purgatory);
  const windowMs = 300;
  const selection = { rateLimit: { max: 2, windowMs, perKey: { operationIdSeparator: "/" } } };
  await assert.rejects(
    c.joinGroup("g", { purgatory, selection: { rateLimit: { max: 0, windowMs } } }),
    (err) => err instanceof InvalidArgumentError && /rate_limit\.max/.test(err.message),
  );
  const stream = await c.joinGroup("g", { purgatory, visibilityTimeoutMs: VIS, selection });
  try {
    await publish(purgatory, "a/1", "a/2", "a/3", "a/4", "b/1");
    const times = { a: [], b: [] };
    let n = 0;
    for await (const d of stream) {
      times[d.operationId[0]].push(d.leaseDeadlineMs - VIS); // when the server leased it
      await d.ack();
      if (++n === 5) break;
    }
    // Key a: the third of any three deliveries is a window after the first; b is not
    // held up by a's full window.
    const a = times.a;
    assert.equal(a.length, 4);
    for (let i = 2; i < a.length; i++) assert.ok(a[i] - a[i - 2] >= windowMs, String(a));
    assert.ok(times.b[0] < a[2], `b waited for a: ${times.b} ${a}`);
  } finally {
    stream.close();
  }
});

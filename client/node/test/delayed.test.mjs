// Delayed operations and schedules against a real server: cancel (by ids, key, prefix),
// reschedule, listOperations page by page and iterOperations, recurring schedules.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, Condition, FailedPreconditionError, InvalidArgumentError, NotFoundError } =
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

async function register(purgatory, ids, keyOf = (id) => `k-${id}`) {
  await c.batchTryCompleteElseWatch(
    ids.map((id) => ({ keys: [keyOf(id)], timeoutMs: 60_000, operationId: id })),
    { purgatory },
  );
}

test("cancel by ids, by key and by prefix; idempotent", async () => {
  const purgatory = "cancel";
  await c.createPurgatory(purgatory);
  await register(purgatory, ["a1", "a2", "b1", "b2", "c1"], (id) => (id === "c1" ? "shared" : `k-${id}`));
  const byIds = await c.cancel(["a1", "nope"], { purgatory });
  assert.deepEqual(byIds.map((s) => [s.operationId, s.state]), [["a1", "CANCELLED"]]);
  assert.ok(byIds[0].sequence > 0);
  assert.deepEqual(await c.cancel(["a1"], { purgatory }), []); // ended already
  const byKey = await c.cancel(undefined, { purgatory, key: "shared" });
  assert.deepEqual(byKey.map((s) => s.operationId), ["c1"]);
  const byPrefix = await c.cancel(undefined, { purgatory, prefix: "b" });
  assert.deepEqual(byPrefix.map((s) => s.operationId).sort(), ["b1", "b2"]);
  assert.equal((await c.getOperation("a2", { purgatory })).state, "WATCHING");
  await assert.rejects(c.cancel(["a2"], { purgatory, key: "x" }), InvalidArgumentError);
  await assert.rejects(c.cancel(undefined, { purgatory }), InvalidArgumentError);
});

test("reschedule moves a pending deadline; FailedPreconditionError once ended", async () => {
  const purgatory = "resched";
  await c.createPurgatory(purgatory);
  const op = await c.tryCompleteElseWatch(["r"], 60_000, { operationId: "r1", purgatory });
  const sooner = await c.reschedule("r1", { purgatory, timeoutMs: 50 });
  assert.equal(sooner.state, "WATCHING");
  assert.ok(sooner.dueTimeMs < op.dueTimeMs - 50_000);
  const due = Date.now() + 30_000;
  assert.equal((await c.reschedule("r1", { purgatory, dueTimeMs: due })).dueTimeMs, due);
  await c.reschedule("r1", { purgatory, timeoutMs: 20 });
  const ended = await c.wait(["r"], 60_000, { operationId: "r1", purgatory });
  assert.equal(ended.state, "EXPIRED");
  await assert.rejects(c.reschedule("r1", { purgatory, timeoutMs: 1000 }), FailedPreconditionError);
  await assert.rejects(c.reschedule("r1", { purgatory }), InvalidArgumentError);
  await assert.rejects(c.reschedule("zz", { purgatory, timeoutMs: 1000 }), NotFoundError);
});

test("listOperations pages in id order with progress; iterOperations walks every page", async () => {
  const purgatory = "listing";
  await c.createPurgatory(purgatory);
  const ids = Array.from({ length: 7 }, (_, i) => `op-${i}`);
  await register(purgatory, ids);
  await register(purgatory, ["other"]);
  await c.tryCompleteElseWatch(["sum"], 60_000, {
    operationId: "op-sum",
    purgatory,
    condition: Condition.sumAtLeast(100),
  });
  await c.checkAndComplete("sum", { amount: 40 }, { purgatory });
  const seen = [];
  let pageToken = "";
  let pages = 0;
  do {
    const page = await c.listOperations({ purgatory, prefix: "op-", pageSize: 3, pageToken });
    seen.push(...page.operations);
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken);
  assert.ok(pages >= 3);
  assert.deepEqual(seen.map((s) => s.operationId), [...ids, "op-sum"]);
  const sum = seen.find((s) => s.operationId === "op-sum");
  assert.equal(sum.result.amountSum, 40); // progress so far
  const all = [];
  for await (const status of c.iterOperations({ purgatory, pageSize: 2 })) all.push(status.operationId);
  assert.deepEqual(all, [...ids, "op-sum", "other"]);
  const byKey = [];
  for await (const status of c.iterOperations({ purgatory, key: "k-other" })) byKey.push(status);
  assert.deepEqual(byKey.map((s) => s.operationId), ["other"]);
  await c.cancel(["op-0"], { purgatory });
  const ended = await c.listOperations({ purgatory, states: ["CANCELLED"] });
  assert.deepEqual(ended.operations.map((s) => [s.operationId, s.state]), [["op-0", "CANCELLED"]]);
});

test("schedules: upsert (idempotent), list, fire, delete", async () => {
  const purgatory = "sched";
  await c.createPurgatory(purgatory);
  const up = await c.upsertSchedule("tick", {
    purgatory,
    everyMs: 200,
    keys: ["stop"],
    payload: "p",
  });
  assert.equal(up.created, true);
  assert.equal(up.changed, true);
  assert.equal(up.schedule.everyMs, 200);
  assert.equal(up.schedule.cron, "");
  assert.deepEqual(up.schedule.keys, ["stop"]);
  assert.equal(up.schedule.condition.kind, "anyKey");
  assert.equal(up.schedule.payload.toString(), "p");
  assert.equal(up.schedule.nextOperationId, `tick@${up.schedule.nextFireTimeMs}`);
  assert.equal(up.schedule.nextFireTimeMs % 200, 0);
  const again = await c.upsertSchedule("tick", { purgatory, everyMs: 200, keys: ["stop"], payload: "p" });
  assert.deepEqual([again.created, again.changed], [false, false]);
  const cron = await c.upsertSchedule("nightly", {
    purgatory,
    cron: "0 3 * * *",
    timeZone: "Europe/Paris",
    condition: Condition.minSignals(2),
    keys: ["a"],
  });
  assert.equal(cron.schedule.cron, "0 3 * * *");
  assert.equal(cron.schedule.timeZone, "Europe/Paris");
  assert.deepEqual(cron.schedule.condition, { kind: "minSignals", count: 2, distinctSources: false });
  assert.deepEqual((await c.listSchedules({ purgatory })).map((s) => s.scheduleId), ["nightly", "tick"]);
  // An occurrence fires (EXPIRED at its fire time) and the next one is armed.
  const fired = [];
  for await (const event of c.subscribe({ purgatory, afterSequence: 0, operationIdPrefix: "tick@" })) {
    fired.push(event);
    break;
  }
  assert.equal(fired[0].state, "EXPIRED");
  assert.equal(fired[0].payload.toString(), "p");
  const cancelled = await c.deleteSchedule("tick", { purgatory });
  assert.equal(cancelled.state, "CANCELLED");
  assert.match(cancelled.operationId, /^tick@\d+$/);
  await assert.rejects(c.deleteSchedule("tick", { purgatory }), NotFoundError);
  await assert.rejects(c.upsertSchedule("bad", { purgatory }), InvalidArgumentError);
  await assert.rejects(c.upsertSchedule("bad", { purgatory, everyMs: 100, cron: "* * * * *" }), InvalidArgumentError);
});

test("an absolute due time, and a debounce that pushes the deadline on each re-send", async () => {
  const purgatory = "due";
  await c.createPurgatory(purgatory);
  const due = Date.now() + 40_000;
  const byDue = await c.tryCompleteElseWatch(["d"], 0, { operationId: "by-due", purgatory, dueTimeMs: due });
  assert.equal(byDue.dueTimeMs, due);
  const options = { operationId: "debounced", purgatory, extendOnResend: true, maxExtendMs: 60_000 };
  const first = await c.tryCompleteElseWatch(["e"], 5_000, options);
  await new Promise((r) => setTimeout(r, 30));
  const again = await c.tryCompleteElseWatch(["e"], 5_000, options);
  assert.equal(again.created, false);
  assert.ok(again.dueTimeMs > first.dueTimeMs, `${again.dueTimeMs} <= ${first.dueTimeMs}`);
  const [spec] = await c.batchTryCompleteElseWatch(
    [{ keys: ["f"], timeoutMs: 0, dueTimeMs: due, operationId: "batch-due" }],
    { purgatory },
  );
  assert.equal(spec.dueTimeMs, due);
});

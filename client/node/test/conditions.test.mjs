// Every condition kind, long-polled through the Node client against a real server.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, Condition } = client;

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

async function registered(operationId) {
  for (let i = 0; i < 500; i++) {
    const op = await c.getOperation(operationId).catch(() => null);
    if (op && op.state === "WATCHING") return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${operationId} never registered`);
}

test("anyKey: the first signal on any watched key", async () => {
  const w = c.wait(["ak-a", "ak-b"], 10_000, { operationId: "ak", condition: Condition.anyKey() });
  await registered("ak");
  await c.checkAndComplete("ak-b");
  const s = await w;
  assert.equal(s.state, "COMPLETED");
  assert.deepEqual(s.result.signalledKeys, ["ak-b"]);
});

test("allKeys: every key signalled at least once", async () => {
  const w = c.wait(["all-a", "all-b"], 10_000, { operationId: "all", condition: Condition.allKeys() });
  await registered("all");
  assert.equal(await c.checkAndComplete("all-a"), 0);
  assert.equal(await c.checkAndComplete("all-a"), 0);
  assert.equal(await c.checkAndComplete("all-b"), 1);
  assert.deepEqual((await w).result.signalledKeys, ["all-a", "all-b"]);
});

test("minSignals with distinct sources: a replica acking twice counts once", async () => {
  const w = c.wait(["ms"], 10_000, {
    operationId: "ms",
    condition: Condition.minSignals(3, { distinctSources: true }),
  });
  await registered("ms");
  for (const source of ["r1", "r1", "r2"]) {
    assert.equal(await c.checkAndComplete("ms", { source }), 0);
  }
  assert.equal(await c.checkAndComplete("ms", { source: "r3" }), 1);
  const s = await w;
  assert.equal(s.result.signalCount, 3);
  assert.deepEqual(s.result.sources, ["r1", "r2", "r3"]);
});

test("minSignals without distinct sources counts every signal", async () => {
  const w = c.wait(["ms2"], 10_000, { operationId: "ms2", condition: Condition.minSignals(2) });
  await registered("ms2");
  assert.equal(await c.checkAndComplete("ms2", { source: "r1" }), 0);
  assert.equal(await c.checkAndComplete("ms2", { source: "r1" }), 1);
  assert.equal((await w).result.signalCount, 2);
});

test("sumAtLeast: the amounts reach the threshold (min bytes)", async () => {
  const w = c.wait(["sum-a", "sum-b"], 10_000, {
    operationId: "sum",
    condition: Condition.sumAtLeast(100),
  });
  await registered("sum");
  assert.equal(await c.checkAndComplete("sum-a", { amount: 60, data: "ab" }), 0);
  assert.equal(await c.checkAndComplete("sum-b", { amount: 40, data: "cd" }), 1);
  const s = await w;
  assert.equal(s.result.amountSum, 100);
  assert.equal(s.result.data.toString(), "abcd");
});

test("valuesAtLeast: every key's latest value reaches its target, earlier values count", async () => {
  await c.checkAndComplete("va-a", { value: 7 }); // before the operation exists
  const w = c.wait(["va-a", "va-b"], 10_000, {
    operationId: "va",
    condition: Condition.valuesAtLeast({ "va-a": 5 }, { defaultTarget: 10 }),
  });
  await registered("va");
  assert.equal(await c.checkAndComplete("va-b", { value: 9 }), 0);
  assert.equal(await c.checkAndComplete("va-b", { value: 10 }), 1);
  assert.deepEqual((await w).result.values, { "va-a": 7, "va-b": 10 });
});

test("an unmet condition expires with what it had", async () => {
  const w = c.wait(["unmet"], 200, { operationId: "unmet", condition: Condition.sumAtLeast(10) });
  await registered("unmet");
  await c.checkAndComplete("unmet", { amount: 3 });
  const s = await w;
  assert.equal(s.state, "EXPIRED");
  assert.equal(s.result.amountSum, 3);
});

test("batch registration and batch signals", async () => {
  const statuses = await c.batchTryCompleteElseWatch([
    { keys: ["b1"], timeoutMs: 10_000, operationId: "batch-1" },
    { keys: ["b2"], timeoutMs: 10_000, operationId: "batch-2", condition: Condition.sumAtLeast(2) },
  ]);
  assert.deepEqual(statuses.map((s) => s.state), ["WATCHING", "WATCHING"]);
  const done = await c.batchCheckAndComplete(["b1", ["b2", { amount: 1 }], ["b2", { amount: 1 }]]);
  assert.equal(done.completed, 2);
  assert.deepEqual(done.completedPerSignal, [1, 0, 1]);
});

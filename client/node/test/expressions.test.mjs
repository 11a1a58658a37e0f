// Conditions with expressions (a CEL filter, match on an attribute, a predicate) through
// the Node client against a real server; an expression's syntax error at registration.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, Condition, InvalidArgumentError } = client;

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

test("filter with distinct sources: two finance approvers", async () => {
  const condition = Condition.where(Condition.minSignals(2, { distinctSources: true }), {
    filter: "signal.attributes.role == 'finance'",
  });
  await c.tryCompleteElseWatch(["n-inv"], 60_000, { operationId: "n-f", condition });
  assert.equal(await c.checkAndComplete("n-inv", { source: "ann", attributes: { role: "finance" } }), 0);
  assert.equal(await c.checkAndComplete("n-inv", { source: "bob", attributes: { role: "sales" } }), 0);
  assert.equal(await c.checkAndComplete("n-inv", { source: "cy", attributes: { role: "finance", n: 3 } }), 1);
  const done = await c.getOperation("n-f");
  assert.equal(done.state, "COMPLETED");
  assert.deepEqual(done.result.sources, ["ann", "cy"]);
  assert.equal(done.result.matchedKey, "n-inv");
  assert.deepEqual(done.result.matchedAttributes, { role: "finance", n: 3 });
});

test("match: only the operation whose attribute the signal carries", async () => {
  for (const invoice of [1, 2]) {
    const condition = Condition.where(Condition.anyKey(), {
      match: "invoice_id",
      predicate: "result.signal_count >= 1",
      attributes: { invoice_id: invoice },
    });
    await c.tryCompleteElseWatch(["n-paid"], 60_000, { operationId: `n-paid-${invoice}`, condition });
  }
  assert.equal(await c.checkAndComplete("n-paid", { attributes: { invoice_id: 3 } }), 0);
  assert.equal(await c.checkAndComplete("n-paid", { attributes: { invoice_id: 2 } }), 1);
  assert.equal((await c.getOperation("n-paid-1")).state, "WATCHING");
  assert.equal((await c.getOperation("n-paid-2")).state, "COMPLETED");
});

test("a syntax error is INVALID_ARGUMENT naming the position", async () => {
  const condition = Condition.where(Condition.anyKey(), { filter: "signal.attributes.x &&" });
  await assert.rejects(c.tryCompleteElseWatch(["n-bad"], 60_000, { condition }), (err) => {
    assert.ok(err instanceof InvalidArgumentError);
    assert.match(err.message, /condition\.filter: syntax error at 1:23/);
    return true;
  });
});

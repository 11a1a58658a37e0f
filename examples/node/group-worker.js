// A worker-group consumer: outcomes shared out among the members of a group, each leased
// to one member at a time and acked once handled. A member that dies holding a lease
// (here: one that never acks) loses it when its visibility timeout runs out, and the
// outcome is delivered again to another member (attempt 2): handle deliveries
// idempotently. After the group's max attempts an outcome becomes a dead letter, which an
// operator lists and redrives.
//
//   node examples/node/group-worker.js [HOST:PORT]      (default 127.0.0.1:50051)
//
// Outside this repository: npm install @purgatory/client (or its packed tarball).
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../../client/node");

async function main(target) {
  const name = `invoices-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    const options = { visibilityTimeoutMs: 300, maxAttempts: 3 };
    // The member that will crash: it takes a delivery and never acks it.
    const flaky = await client.joinGroup("billing", { ...options, prefetch: 1 });
    // Three invoices fall due (pure timers that expire at once).
    for (const id of ["invoice-1", "invoice-2", "invoice-3"]) {
      await client.wait([], 5, { operationId: id });
    }
    const lost = (await flaky[Symbol.asyncIterator]().next()).value;
    console.log(`flaky member took ${lost.operationId} (attempt ${lost.attempt}) and crashed`);
    flaky.close();

    // A healthy member handles everything, the lost invoice included once its lease ran out.
    const worker = await client.joinGroup("billing", options);
    const handled = new Map();
    for await (const delivery of worker) {
      handled.set(delivery.operationId, delivery.attempt); // idempotent: keyed by id
      await delivery.ack();
      if (handled.size === 3) break; // breaking out leaves the group
    }
    const names = [...handled.keys()].sort();
    console.log(`handled: ${JSON.stringify(names)}, ${lost.operationId} on attempt ${handled.get(lost.operationId)}`);
    const [group] = await client.listGroups();
    const { deadLetters } = await client.listDeadLetters("billing");
    console.log(`group ${group.name}: ${group.leased} leased, ${deadLetters.length} dead letters`);
    if (names.join() !== "invoice-1,invoice-2,invoice-3" || handled.get(lost.operationId) !== 2) {
      throw new Error("unexpected");
    }
  } finally {
    await client.deletePurgatory(name);
    client.close();
  }
}

main(process.argv[2] ?? "127.0.0.1:50051").catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

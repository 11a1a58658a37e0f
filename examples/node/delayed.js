// Delayed messages with cancel: "cancel the order if it is still unpaid after 30 minutes"
// (here 1 s). Each order registers a timer (no keys: it ends only by expiry or by
// ForceComplete) carrying the order id as payload. A worker subscribed to the purgatory
// acts on EXPIRED outcomes; paying an order cancels its delayed message with ForceComplete,
// whose outcome (FORCE_COMPLETED) the worker ignores.
//
//   node examples/node/delayed.js [HOST:PORT]      (default $PURGATORY_TARGET, else 127.0.0.1:50051)
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../../client/node");

const DELAY_MS = 1000;

async function main(target) {
  const name = `orders-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    const events = client.subscribe({ afterSequence: 0 });
    for (const order of ["order-1", "order-2", "order-3"]) {
      await client.tryCompleteElseWatch([], DELAY_MS, {
        operationId: `unpaid-${order}`,
        payload: order,
      });
      console.log(`${order} placed: cancelled unless paid within ${DELAY_MS} ms`);
    }
    const paid = await client.forceComplete("unpaid-order-2");
    console.log(`order-2 paid: delayed cancel withdrawn (${paid.completed})`);

    const cancelled = [];
    const withdrawn = [];
    for await (const event of events) {
      const order = event.payload.toString();
      if (event.state === "EXPIRED") {
        console.log(`${order} still unpaid after ${DELAY_MS} ms: cancelling it`);
        cancelled.push(order);
      } else if (event.state === "FORCE_COMPLETED") {
        withdrawn.push(order);
      }
      if (cancelled.length + withdrawn.length === 3) break; // ends the stream
    }
    if (cancelled.sort().join() !== "order-1,order-3" || withdrawn.join() !== "order-2") {
      throw new Error(`unexpected: cancelled ${cancelled}, withdrawn ${withdrawn}`);
    }
  } finally {
    await client.deletePurgatory(name);
    client.close();
  }
}

main(process.argv[2] ?? process.env.PURGATORY_TARGET ?? "127.0.0.1:50051").catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

// A watchMany producer: register many operations on ONE Session stream and act on each
// outcome as it ends. Here, 50 orders wait for their payment (a signal on "paid:<order>")
// for at most 2 s; a payment service pays most of them meanwhile, the rest expire.
// Operation ids are given, so a stream cut by a restart or a slow read is re-opened and
// only the watches still open are re-sent (nothing registered twice, no outcome twice).
//
//   node examples/node/watch-many.js [HOST:PORT]      (default 127.0.0.1:50051)
//
// Outside this repository: npm install @purgatory/client (or its packed tarball).
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../../client/node");

async function main(target) {
  const name = `orders-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    const orders = Array.from({ length: 50 }, (_, i) => `order-${i}`);
    const specs = orders.map((order) => ({
      keys: [`paid:${order}`],
      timeoutMs: 2_000,
      operationId: `pay-${order}`,
      payload: order,
    }));
    // The payment service, elsewhere: once the orders wait, it pays every order but each
    // 5th, in one batch of signals.
    const payments = (async () => {
      while ((await client.getPurgatory()).pending < orders.length) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const paid = orders.filter((_, i) => i % 5 !== 0).map((o) => `paid:${o}`);
      await client.batchCheckAndComplete(paid);
    })();
    const counts = { COMPLETED: 0, EXPIRED: 0 };
    for await (const event of client.watchMany(specs, { frameSize: 10 })) {
      counts[event.state] += 1; // event.payload is the order
    }
    await payments;
    console.log(`outcomes: ${counts.COMPLETED} paid, ${counts.EXPIRED} expired unpaid`);
    if (counts.COMPLETED !== 40 || counts.EXPIRED !== 10) throw new Error("unexpected");
  } finally {
    await client.deletePurgatory(name);
    client.close();
  }
}

main(process.argv[2] ?? "127.0.0.1:50051").catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

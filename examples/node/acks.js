// N acks from distinct replicas: a produce request is answered once 3 different replicas
// have acknowledged it (Kafka's DelayedProduce with acks=all). A replica that acks twice
// counts once.
//
//   node examples/node/acks.js [HOST:PORT]      (default $PURGATORY_TARGET, else 127.0.0.1:50051)
//
// Outside this repository: npm install <path-to>/client/node, then require it by name.
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient, Condition } = require("../../client/node");

async function main(target) {
  const name = `produce-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    const key = "orders-0@42"; // partition orders-0, offset 42
    const keys = [key];
    const options = {
      condition: Condition.minSignals(3, { distinctSources: true }),
      operationId: "produce-orders-0-42",
    };
    // Register first (so every ack from now on counts), then long-poll the same id:
    // a re-send of a known id waits on that operation instead of adding another.
    await client.tryCompleteElseWatch(keys, 5_000, options);
    const answer = client.wait(keys, 5_000, options);
    for (const replica of ["broker-1", "broker-2", "broker-2", "broker-3"]) {
      const completed = await client.checkAndComplete(key, { source: replica });
      console.log(`ack from ${replica}: completed ${completed} operation(s)`);
    }
    const status = await answer;
    console.log(`produce answered: ${status.state}, acked by ${JSON.stringify(status.result.sources)}`);
    if (status.state !== "COMPLETED" || status.result.signalCount !== 3) {
      throw new Error(`unexpected outcome: ${JSON.stringify(status)}`);
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

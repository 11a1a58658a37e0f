// A min-bytes long-poll fetch: a consumer's fetch waits until at least 1000 bytes were
// produced to the partitions it reads, or until its max wait passes, and then gets
// what there is (Kafka's DelayedFetch with fetch.min.bytes / fetch.max.wait.ms).
//
//   node examples/node/fetch.js [HOST:PORT]      (default $PURGATORY_TARGET, else 127.0.0.1:50051)
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient, Condition } = require("../../client/node");

const MIN_BYTES = 1000;

async function fetch(client, fetchId, maxWaitMs, produce) {
  const keys = ["events-0", "events-1"];
  const options = { condition: Condition.sumAtLeast(MIN_BYTES), operationId: fetchId };
  await client.tryCompleteElseWatch(keys, maxWaitMs, options);
  const answer = client.wait(keys, maxWaitMs, options);
  for (const [i, size] of produce.entries()) {
    await client.checkAndComplete(`events-${i % 2}`, { amount: size, data: `m${i}:${size};` });
  }
  const status = await answer;
  const got = status.result.amountSum;
  console.log(`${fetchId}: ${status.state} with ${got} bytes (${status.result.data.toString()})`);
  const enough = produce.reduce((a, b) => a + b, 0) >= MIN_BYTES;
  const ok = enough
    ? status.state === "COMPLETED" && got >= MIN_BYTES
    : status.state === "EXPIRED" && got < MIN_BYTES;
  if (!ok) throw new Error(`unexpected outcome: ${JSON.stringify(status)}`);
}

async function main(target) {
  const name = `fetch-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    // Enough data arrives: the fetch is answered as soon as it reaches min bytes.
    await fetch(client, "fetch-1", 10_000, [400, 300, 500]);
    // Too little: the fetch is answered at its max wait with what there is.
    await fetch(client, "fetch-2", 500, [200]);
  } finally {
    await client.deletePurgatory(name);
    client.close();
  }
}

main(process.argv[2] ?? process.env.PURGATORY_TARGET ?? "127.0.0.1:50051").catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

// A subscription that survives its consumer's restart: read outcomes, remember the last
// sequence processed, and later resume after it; the server replays exactly the retained
// events after that sequence (then live), so nothing is missed or processed twice. While
// it runs the client also resumes by itself after a dropped stream.
//
//   node examples/node/subscription.js [HOST:PORT]      (default $PURGATORY_TARGET, else 127.0.0.1:50051)
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../../client/node");

async function main(target) {
  const name = `dashboard-${randomUUID().slice(0, 8)}`;
  const client = new PurgatoryClient(target, { purgatory: name });
  await client.createPurgatory(name);
  try {
    for (let i = 0; i < 6; i++) {
      // six outcomes: even ones complete, odd ones expire
      if (i % 2 === 0) {
        await client.tryCompleteElseWatch([`job-${i}`], 60_000, { operationId: `job-${i}` });
        await client.checkAndComplete(`job-${i}`);
      } else {
        await client.wait([`job-${i}`], 50, { operationId: `job-${i}` });
      }
    }

    const seen = [];
    for await (const event of client.subscribe({ afterSequence: 0 })) {
      console.log(`#${event.sequence} ${event.operationId} ${event.state}`);
      seen.push(event.sequence);
      if (seen.length === 3) break; // the consumer stops here; it stored seen.at(-1)
    }
    for await (const event of client.subscribe({ afterSequence: seen.at(-1) })) {
      console.log(`#${event.sequence} ${event.operationId} ${event.state} (resumed)`);
      seen.push(event.sequence);
      if (seen.length === 6) break;
    }
    const only = [];
    for await (const event of client.subscribe({ afterSequence: 0, states: ["EXPIRED"] })) {
      only.push(event.operationId);
      if (only.length === 3) break;
    }
    console.log(`expired only: ${JSON.stringify(only)}`);
    if (seen.join() !== "1,2,3,4,5,6" || only.join() !== "job-1,job-3,job-5") {
      throw new Error(`unexpected: ${seen} ${only}`);
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

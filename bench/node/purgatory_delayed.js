// Purgatory's side of bench/bullmq_bench.py, through the Node client: `workers` members
// of one worker group (each its own client, so its own channel) with `prefetch` =
// `concurrency` leases each; `jobs` delayed messages registered with
// batchTryCompleteElseWatch (chunks of 1000, dueTimeMs: delayed_common.dueTimes), each
// EXPIRED outcome leased to a member when due; each member notes the delivery's lateness
// (now - dueTimeMs) and acks it: its acks go out in one ackBatch per half of its prefetch
// (or 10 ms after the first, whichever comes first), each a message on the client's
// AckStream; deliveries ready together arrive in one message (the client's default).
// Prints one JSON line.
//
//   node bench/node/purgatory_delayed.js '{"target":"127.0.0.1:50051","purgatory":"bench",
//     "jobs":1000,"workers":4,"concurrency":16,"leadMs":3000,"spreadMs":1000,"tag":"r1"}'
"use strict";
const { PurgatoryClient } = require("../../client/node");
const { Meter, dueTimes, within } = require("./delayed_common.js");

/** Acks of one member: sent in one ackBatch call once `ackBatch` are pending (default
 * half the member's prefetch) or `lingerMs` (default 10) after the first of them. */
function batchedAcks(client, group, purgatory, meter, cfg, calls) {
  const batch = cfg.ackBatch ?? Math.max(1, Math.floor(cfg.concurrency / 2));
  let pending = [];
  let timer;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    const entries = pending;
    pending = [];
    calls.rpcs++;
    client.ackBatch(group, entries, { purgatory }).then(
      (results) => meter.ackedNow(results.filter((r) => r.ok).length),
      (err) => console.error(err),
    );
  };
  return (delivery) => {
    pending.push({ sequence: delivery.sequence, attempt: delivery.attempt });
    if (pending.length >= batch) flush();
    else if (timer === undefined) timer = setTimeout(flush, cfg.lingerMs ?? 10);
  };
}

async function consume(stream, ack, meter) {
  for await (const delivery of stream) {
    meter.delivered(delivery.dueTimeMs);
    ack(delivery);
  }
}

async function main(cfg) {
  const { purgatory } = cfg;
  const group = `bench-${cfg.tag}`;
  const meter = new Meter(cfg.jobs);
  const clients = Array.from({ length: cfg.workers + 1 }, () => new PurgatoryClient(cfg.target, { deadlineMs: 30_000 }));
  const producer = clients[0];
  const streams = [];
  const calls = { rpcs: 0 };
  for (const client of clients.slice(1)) {
    const stream = await client.joinGroup(group, { purgatory, prefetch: cfg.concurrency, visibilityTimeoutMs: 60_000 });
    streams.push(stream);
    consume(stream, batchedAcks(client, group, purgatory, meter, cfg, calls), meter).catch((err) => console.error(err));
  }
  const started = performance.now();
  const dues = dueTimes(cfg, Date.now());
  for (let i = 0; i < dues.length; i += 1000) {
    await producer.batchTryCompleteElseWatch(
      dues.slice(i, i + 1000).map((dueTimeMs, j) => ({
        keys: [],
        dueTimeMs,
        operationId: `${group}-${i + j}`,
      })),
      { purgatory },
    );
  }
  const enqueueS = (performance.now() - started) / 1000;
  await within(meter, cfg.leadMs + cfg.spreadMs + 120_000);
  const report = meter.report({ system: "purgatory", enqueue_s: enqueueS, late_enqueue: enqueueS * 1000 > cfg.leadMs, ack_rpcs: calls.rpcs });
  for (const stream of streams) stream.close();
  await producer.deleteGroup(group, { purgatory });
  for (const client of clients) client.close();
  return report;
}

main(JSON.parse(process.argv[2])).then(
  (report) => console.log(JSON.stringify(report)),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

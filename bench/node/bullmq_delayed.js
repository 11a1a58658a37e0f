// BullMQ's side of bench/bullmq_bench.py: `workers` Worker objects (each its own Redis
// connection) with `concurrency` jobs in flight each; `jobs` delayed jobs added with
// addBulk (chunks of 1000), each due at its own time (delayed_common.dueTimes); each
// processor notes its lateness (now - timestamp - delay) and returns: BullMQ then moves
// the job to completed (removed: removeOnComplete), its ack. Prints one JSON line.
//
//   node bench/node/bullmq_delayed.js '{"redisPort":6379,"jobs":1000,"workers":4,
//     "concurrency":16,"leadMs":3000,"spreadMs":1000,"tag":"r1"}'
"use strict";
const { Queue, Worker } = require("bullmq");
const { Meter, dueTimes, within } = require("./delayed_common.js");

async function main(cfg) {
  const connection = { host: "127.0.0.1", port: cfg.redisPort };
  const name = `bench-${cfg.tag}`;
  const queue = new Queue(name, { connection });
  const meter = new Meter(cfg.jobs);
  const workers = [];
  for (let i = 0; i < cfg.workers; i++) {
    const worker = new Worker(
      name,
      async (job) => meter.delivered(job.timestamp + job.opts.delay),
      { connection, concurrency: cfg.concurrency, removeOnComplete: { count: 0 } },
    );
    worker.on("completed", () => meter.ackedNow());
    worker.on("error", (err) => console.error(err));
    workers.push(worker);
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const started = performance.now();
  const dues = dueTimes(cfg, Date.now());
  for (let i = 0; i < dues.length; i += 1000) {
    const now = Date.now();
    await queue.addBulk(
      dues.slice(i, i + 1000).map((due, j) => ({
        name: "job",
        data: { n: i + j },
        opts: { delay: Math.max(0, due - now), removeOnComplete: true },
      })),
    );
  }
  const enqueueS = (performance.now() - started) / 1000;
  await within(meter, cfg.leadMs + cfg.spreadMs + 120_000);
  const report = meter.report({ system: "bullmq", enqueue_s: enqueueS, late_enqueue: enqueueS * 1000 > cfg.leadMs });
  await Promise.all(workers.map((w) => w.close()));
  await queue.obliterate({ force: true });
  await queue.close();
  return report;
}

main(JSON.parse(process.argv[2])).then(
  (report) => console.log(JSON.stringify(report)),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

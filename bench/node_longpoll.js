// The Node.js side of bench/node_client_bench.py: long-poll pairs through the Node client.
// A pair is client.wait() on a fresh key (a long-poll), client.checkAndComplete() on that
// key (re-sent if it overtook the long-poll), and the long-poll's answer; `concurrency`
// pairs are in flight at once over one client (one channel). Warms up, measures for
// `duration` seconds, then prints one JSON line: pairs, seconds, retries, latencies (ms,
// signal sent -> answer received) at p50 and p99, and this process's CPU time per pair.
//
//   node bench/node_longpoll.js TARGET CONCURRENCY DURATION_S WARMUP_S
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../client/node");

async function main([target, concurrency, duration, warmup]) {
  const client = new PurgatoryClient(target);
  // Keys (and operation ids) never repeat within a server's life: a re-sent id would be
  // answered with that earlier operation's outcome.
  const prefix = randomUUID().slice(0, 8);
  let serial = 0;
  let retries = 0;
  async function worker(end, latencies) {
    let pairs = 0;
    while (performance.now() < end) {
      const key = `js-${prefix}-${serial++}`;
      const waiting = client.wait([key], 600_000, { operationId: key });
      await new Promise((resolve) => setImmediate(resolve)); // the long-poll goes out first
      const t0 = performance.now();
      let answered = false;
      waiting.then(() => (answered = true), () => undefined);
      while ((await client.checkAndComplete(key)) === 0) {
        if (answered) throw new Error(`${key} answered early`); // a bug in the benchmark
        retries++;
      }
      await waiting;
      latencies.push(performance.now() - t0);
      pairs++;
    }
    return pairs;
  }
  async function phase(seconds) {
    const latencies = [];
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const end = start + seconds * 1000;
    const counts = await Promise.all(
      Array.from({ length: Number(concurrency) }, () => worker(end, latencies)),
    );
    const ms = performance.now() - start;
    const cpu = process.cpuUsage(cpu0);
    return { pairs: counts.reduce((a, b) => a + b, 0), ms, latencies, cpuUs: cpu.user + cpu.system };
  }
  await phase(Number(warmup));
  retries = 0;
  const run = await phase(Number(duration));
  client.close();
  const lat = run.latencies.sort((a, b) => a - b);
  const at = (q) => lat[Math.max(0, Math.min(lat.length - 1, Math.ceil(q * lat.length) - 1))];
  console.log(
    JSON.stringify({
      pairs: run.pairs,
      seconds: run.ms / 1000,
      retries,
      p50_ms: at(0.5),
      p99_ms: at(0.99),
      cpu_us_per_pair: run.cpuUs / run.pairs,
    }),
  );
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

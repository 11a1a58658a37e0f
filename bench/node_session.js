// The Node.js side of bench/node_client_bench.py's Session workloads, through the Node
// client, printing one JSON line: {ops, seconds, cpu_us_per_op}.
//
//   watchmany: `count` pure timers (timeout 10 ms, fresh ids) registered with one
//     client.watchMany() call (frames of 100 on one Session stream); measured from the
//     call to the last outcome received: operations registered and answered per second.
//   dispatcher: one producer keeps `window` signals outstanding on client.dispatcher()
//     (default config) for `duration` seconds: acknowledged signals per second.
// Each is run once as a warm-up (a tenth of the work) first.
//
//   node bench/node_session.js TARGET watchmany COUNT
//   node bench/node_session.js TARGET dispatcher DURATION_S WINDOW
"use strict";
const { randomUUID } = require("node:crypto");
const { PurgatoryClient } = require("../client/node");

async function watchMany(client, count) {
  const tag = randomUUID().slice(0, 8);
  const specs = Array.from({ length: count }, (_, i) => ({
    keys: [],
    timeoutMs: 10,
    operationId: `jwm-${tag}-${i}`,
  }));
  let ops = 0;
  for await (const event of client.watchMany(specs)) {
    if (event.state !== "EXPIRED") throw new Error(`${event.operationId}: ${event.state}`);
    ops++;
  }
  return ops;
}

async function dispatch(client, seconds, window) {
  const dispatcher = client.dispatcher();
  const tag = randomUUID().slice(0, 8);
  const outstanding = [];
  let head = 0;
  let n = 0;
  let ops = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    while (outstanding.length - head < window) outstanding.push(dispatcher.signal(`jd-${tag}-${n++}`));
    await outstanding[head++];
    ops++;
    if (head > 10_000) outstanding.splice(0, head), (head = 0);
  }
  await Promise.all(outstanding.slice(head));
  ops += outstanding.length - head;
  await dispatcher.shutdown();
  return ops;
}

async function measure(run) {
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const ops = await run();
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { ops, seconds, cpu_us_per_op: (cpu.user + cpu.system) / Math.max(ops, 1) };
}

async function main([target, mode, a, b]) {
  const client = new PurgatoryClient(target);
  let result;
  if (mode === "watchmany") {
    await watchMany(client, Math.max(1, Math.floor(Number(a) / 10)));
    result = await measure(() => watchMany(client, Number(a)));
  } else if (mode === "dispatcher") {
    await dispatch(client, Number(a) / 10, Number(b));
    result = await measure(() => dispatch(client, Number(a), Number(b)));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  client.close();
  console.log(JSON.stringify(result));
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

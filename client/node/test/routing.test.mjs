// Replicated purgatories: the client follows UNAVAILABLE + `purgatory-owner` to the owner.
// Runs `make cluster`'s module (three nats-server nodes and two Python purgatory servers
// sharing the replicated purgatory "orders"), talks to the SECOND server only, and checks
// that calls reach the owner and the route is cached (docs/scale-out.md §6).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { REPO, tempDir } from "./server.mjs";

const { NotFoundError, PurgatoryClient } = client;
const PYTHON = path.join(REPO, ".venv", "bin", "python");

let cluster;
let servers = [];
let pids = [];

before(async () => {
  cluster = spawn(
    PYTHON,
    ["-m", "purgatory_server._cluster.local", "--dir", tempDir("purgatory-cluster-")]
      .concat(["--port", "0", "--lease-ms", "1500"]),
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  process.on("exit", () => cluster.kill("SIGKILL"));
  let out = "";
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cluster not ready: ${out}`)), 100_000);
    cluster.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    cluster.on("exit", (code) => reject(new Error(`cluster exited ${code}: ${out}`)));
  });
  servers = [...out.matchAll(/purgatory server\d: (\S+)/g)].map((m) => m[1]);
  pids = [...out.matchAll(/purgatory server\d: \S+ \(pid (\d+)/g)].map((m) => Number(m[1]));
});

after(async () => {
  if (cluster.exitCode === null) {
    const exited = new Promise((resolve) => cluster.on("exit", resolve));
    cluster.kill("SIGTERM");
    await exited;
  }
});

test("calls through a server that does not own the purgatory reach its owner", async () => {
  assert.equal(servers.length, 2);
  const clients = servers.map((target) => new PurgatoryClient(target, { purgatory: "orders" }));
  try {
    for (const c of clients) assert.equal((await c.getPurgatory()).name, "orders");
    // Exactly one of the two was sent on: the standby's client, to the owner.
    const routed = clients.filter((c) => c.router.routes.size > 0);
    assert.equal(routed.length, 1);
    const c = routed[0];
    const owner = servers[1 - clients.indexOf(c)];
    assert.deepEqual([...c.router.routes], [["orders", owner]]);
    const status = await c.tryCompleteElseWatch(["k"], 60_000, { operationId: "node-1" });

    assert.equal(status.state, "WATCHING");
    assert.equal(await c.checkAndComplete("k"), 1);
    assert.equal((await c.getOperation("node-1")).state, "COMPLETED");
    assert.equal((await c.getPurgatory()).pending, 0);
  } finally {
    for (const c of clients) c.close();
  }
});

test("ackBatch through the standby reaches the owner", async () => {
  // The standby answers the AckStream request UNAVAILABLE naming the owner; the client
  // sends it again as a call, which follows the hint.
  const clients = servers.map((target) => new PurgatoryClient(target, { purgatory: "orders" }));
  try {
    for (const c of clients) await assert.rejects(c.ackBatch("nobody", [1]), NotFoundError);
    assert.equal(clients.filter((c) => c.router.routes.size > 0).length, 1);
  } finally {
    for (const c of clients) c.close();
  }
});

test("a subscription opened at the standby gets the owner's events", async () => {
  const clients = servers.map((target) => new PurgatoryClient(target, { purgatory: "orders" }));
  try {
    for (const c of clients) await c.getPurgatory();
    const c = clients.find((x) => x.router.routes.size > 0); // the standby's client
    const owner = c.router.routes.get("orders");
    c.router.routes.clear(); // the stream itself must find the owner
    const start = (await c.getPurgatory()).lastSequence;
    c.router.routes.clear();
    const stream = c.subscribe({ afterSequence: start });
    const first = stream.next();
    await c.tryCompleteElseWatch(["sub"], 60_000, { operationId: "node-sub" });
    assert.equal(await c.checkAndComplete("sub"), 1);
    const { value } = await first;
    assert.equal(value.operationId, "node-sub");
    assert.equal(value.sequence, start + 1);
    assert.equal(c.router.routes.get("orders"), owner);
    await stream.return(undefined);
  } finally {
    for (const c of clients) c.close();
  }
});

// Last: it kills the owner. A subscriber dialing `ipv4:owner,standby` loses its stream;
// the standby names the dead owner until its lease expires, and the old client spent its
// hop budget there and parked the route on the dead owner for good (0 events after the
// takeover). It must resume at the new owner from its sequence, with no gap.
test("a subscriber resumes at the new owner after the owner is killed", async () => {
  const probe = servers.map((target) => new PurgatoryClient(target, { purgatory: "orders" }));
  for (const c of probe) await c.getPurgatory();
  const standbyIndex = probe.findIndex((x) => x.router.routes.size > 0);
  for (const c of probe) c.close();
  const ownerIndex = 1 - standbyIndex;
  const both = `ipv4:${servers[ownerIndex]},${servers[standbyIndex]}`;
  const writer = new PurgatoryClient(both, { purgatory: "orders", deadlineMs: 5000 });
  const reader = new PurgatoryClient(both, { purgatory: "orders" });
  const write = async (id) => {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await writer.tryCompleteElseWatch([id], 60_000, { operationId: id });
        assert.equal(await writer.checkAndComplete(id), 1);
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  try {
    const start = (await writer.getPurgatory()).lastSequence;
    const events = [];
    const stream = reader.subscribe({ afterSequence: start });
    const reading = (async () => {
      for await (const event of stream) {
        events.push(event);
        if (events.length === 3) return;
      }
    })();
    await write("kill-1");
    const until = async (count, ms) => {
      const deadline = Date.now() + ms;
      while (events.length < count) {
        assert.ok(Date.now() < deadline, `${events.length} of ${count} events: stalled`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    await until(1, 10_000);
    process.kill(pids[ownerIndex], "SIGKILL");
    await write("kill-2");
    await write("kill-3");
    await until(3, 15_000);
    await reading;
    assert.deepEqual(
      events.map((e) => e.sequence),
      [start + 1, start + 2, start + 3],
    );
    assert.deepEqual(
      events.map((e) => e.operationId),
      ["kill-1", "kill-2", "kill-3"],
    );
  } finally {
    writer.close();
    reader.close();
  }
});

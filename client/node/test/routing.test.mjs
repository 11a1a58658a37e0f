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

const { PurgatoryClient } = client;
const PYTHON = path.join(REPO, ".venv", "bin", "python");

let cluster;
let servers = [];

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

// Worker groups against a real server: joining, leased deliveries acked and extended, a
// member killed mid-lease (its delivery goes to another member), dead letters, their
// redrive and discard, the group listing and deletion.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import client from "../dist/cjs/index.js";
import { startServer } from "./server.mjs";

const { PurgatoryClient, FailedPreconditionError, InvalidArgumentError, NotFoundError } = client;
const MEMBER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "group-member.cjs");

let server;
let c;
before(async () => {
  server = await startServer();
  c = new PurgatoryClient(server.target, { deadlineMs: 10_000 });
});
after(async () => {
  c.close();
  await server.stop();
});

/** Ends an operation now: its outcome is published to every group. */
const publish = (purgatory, id) =>
  c.tryCompleteElseWatch([], 60_000, { operationId: id, purgatory }).then(() =>
    c.forceComplete(id, { purgatory }),
  );

async function nextOf(stream) {
  const { value, done } = await stream[Symbol.asyncIterator]().next();
  assert.equal(done, false);
  return value;
}

test("a member gets leased deliveries; ack ends them, extendLease keeps them", async () => {
  const purgatory = "g-basic";
  await c.createPurgatory(purgatory);
  const stream = await c.joinGroup("workers", { purgatory, visibilityTimeoutMs: 800 });
  try {
    const it = stream[Symbol.asyncIterator]();
    await publish(purgatory, "job-1");
    const d = (await it.next()).value;
    assert.deepEqual([d.operationId, d.state, d.attempt, d.group], ["job-1", "FORCE_COMPLETED", 1, "workers"]);
    assert.equal(d.deadLetter, false);
    assert.ok(d.leaseDeadlineMs > Date.now() - 5_000);
    const deadline = await d.extendLease(10_000);
    assert.ok(deadline > Date.now() + 5_000);
    await new Promise((r) => setTimeout(r, 1_000)); // past the first lease: extended, kept
    await d.ack();
    await assert.rejects(d.ack(), NotFoundError); // acked already
    const [info] = await c.listGroups({ purgatory });
    assert.deepEqual(
      [info.name, info.members, info.leased, info.ready, info.visibilityTimeoutMs],
      ["workers", 1, 0, 0, 800],
    );
  } finally {
    stream.close();
  }
  await assert.rejects(c.joinGroup("", { purgatory }), InvalidArgumentError);
});

test("a member killed mid-lease: its delivery goes to another member", async () => {
  const purgatory = "g-kill";
  await c.createPurgatory(purgatory);
  const child = spawn(process.execPath, [MEMBER, server.target, purgatory, "crew", "400"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const line = (pattern) =>
    new Promise((resolve, reject) => {
      const check = () => pattern.test(out) && resolve();
      child.stdout.on("data", (chunk) => {
        out += chunk;
        check();
      });
      child.once("exit", (code) => reject(new Error(`member exited ${code}: ${out}`)));
      check();
    });
  try {
    await line(/joined/);
    await publish(purgatory, "job-k");
    await line(/delivery job-k attempt 1/);
    child.kill("SIGKILL"); // holding the lease, never acking
    const other = await c.joinGroup("crew", { purgatory, visibilityTimeoutMs: 400 });
    try {
      const d = await nextOf(other);
      assert.deepEqual([d.operationId, d.attempt], ["job-k", 2]);
      await d.ack();
    } finally {
      other.close();
    }
  } finally {
    child.kill("SIGKILL");
  }
});

test("an outcome out of attempts is a dead letter; redrive gives it back", async () => {
  const purgatory = "g-dead";
  await c.createPurgatory(purgatory);
  const stream = await c.joinGroup("dl", { purgatory, visibilityTimeoutMs: 50, maxAttempts: 1 });
  const it = stream[Symbol.asyncIterator]();
  try {
    await publish(purgatory, "job-d");
    const first = (await it.next()).value;
    assert.equal(first.attempt, 1); // not acked: the lease runs out, no attempt left
    let page;
    for (let i = 0; i < 200; i++) {
      page = await c.listDeadLetters("dl", { purgatory });
      if (page.deadLetters.length > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(page.deadLetters.length, 1);
    const dead = page.deadLetters[0];
    assert.deepEqual([dead.operationId, dead.deadLetter, dead.attempt], ["job-d", true, 1]);
    assert.equal(page.nextAfterSequence, 0);
    await assert.rejects(first.extendLease(), FailedPreconditionError); // the lease is gone
    assert.deepEqual(await c.redrive("dl", [dead.sequence], { purgatory }), [dead.sequence]);
    const again = (await it.next()).value;
    // Fencing: a redrive goes on counting attempts (a fresh budget, never a number reused).
    assert.deepEqual([again.operationId, again.attempt, again.deadLetter], ["job-d", 2, false]);
    await assert.rejects(first.ack(), FailedPreconditionError); // the stale holder is fenced
    await again.ack();
    assert.equal((await c.listDeadLetters("dl", { purgatory })).deadLetters.length, 0);
  } finally {
    stream.close();
  }
  // Deleting the group drops what it holds.
  await publish(purgatory, "job-left");
  assert.equal(await c.deleteGroup("dl", { purgatory }), 1);
  assert.deepEqual(await c.listGroups({ purgatory }), []);
  await assert.rejects(c.deleteGroup("dl", { purgatory }), NotFoundError);
});

/** Waits until the group `group` has `count` dead letters; resolves to their page. */
async function deadLetters(group, purgatory, count) {
  for (let i = 0; i < 250; i++) {
    const page = await c.listDeadLetters(group, { purgatory });
    if (page.deadLetters.length >= count) return page;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${group} never had ${count} dead letters`);
}

test("discardDeadLetters drops named dead letters, or all, for good", async () => {
  const purgatory = "g-discard";
  await c.createPurgatory(purgatory);
  const stream = await c.joinGroup("dd", { purgatory, visibilityTimeoutMs: 50, maxAttempts: 1 });
  const it = stream[Symbol.asyncIterator]();
  try {
    for (const id of ["drop-a", "drop-b", "drop-c"]) {
      await publish(purgatory, id);
      assert.equal((await it.next()).value.operationId, id); // not acked: out of attempts
    }
    const page = await deadLetters("dd", purgatory, 3);
    const [a, b, cc] = page.deadLetters.map((d) => d.sequence);
    await assert.rejects(c.discardDeadLetters("dd", [], { purgatory }), InvalidArgumentError);
    assert.deepEqual(await c.discardDeadLetters("dd", [a], { purgatory }), [a]);
    assert.deepEqual(await c.discardDeadLetters("dd", [a], { purgatory }), []); // gone already
    const left = (await c.listDeadLetters("dd", { purgatory })).deadLetters;
    assert.deepEqual(left.map((d) => d.sequence), [b, cc]);
    const rest = await c.discardDeadLetters("dd", undefined, { purgatory }); // all of them
    assert.deepEqual(rest.sort((x, y) => x - y), [b, cc]);
    assert.equal((await c.listDeadLetters("dd", { purgatory })).deadLetters.length, 0);
    // Nothing discarded is delivered again: the member's next delivery is a new outcome.
    await publish(purgatory, "drop-fresh");
    const fresh = (await it.next()).value;
    assert.deepEqual([fresh.operationId, fresh.attempt], ["drop-fresh", 1]);
    await fresh.ack();
  } finally {
    stream.close();
  }
});

test("a member re-joins after its server restarts and keeps receiving", async () => {
  const toml = `
grace_s = 0.2
log_level = "WARNING"
[[purgatories]]
name = "g-durable"
durable = true
`;
  const first = await startServer({ toml });
  const dc = new PurgatoryClient(first.target, {
    purgatory: "g-durable",
    deadlineMs: 5_000,
    resume: { attempts: 60, initialDelayMs: 20, maxDelayMs: 200 },
  });
  let second;
  const stream = await dc.joinGroup("survivors");
  try {
    const it = stream[Symbol.asyncIterator]();
    await dc.wait([], 5, { operationId: "before" });
    const d1 = (await it.next()).value;
    assert.equal(d1.operationId, "before");
    await d1.ack();
    const next = it.next(); // the member is reading when the server goes away
    await first.stop();
    second = await startServer({ toml, listen: first.target, dataDir: first.dataDir });
    for (let i = 0; ; i++) {
      const [group] = await dc.listGroups().catch(() => []);
      if (group?.members === 1) break;
      if (i > 500) throw new Error("the member never re-joined");
      await new Promise((r) => setTimeout(r, 20));
    }
    await dc.wait([], 5, { operationId: "after" });
    const d2 = (await next).value;
    assert.equal(d2.operationId, "after");
    await d2.ack();
  } finally {
    stream.close();
    dc.close();
    await (second ?? first).stop();
  }
});

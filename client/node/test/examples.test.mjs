// Every Node.js script under examples/node runs, as a user would run it, against a real
// server with the default limits, and prints what its header promises. (The Python
// examples run the same way from tests/test_examples.py.)
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { REPO, startServer } from "./server.mjs";

const EXAMPLES = path.join(REPO, "examples", "node");
// One line each script must print (its result; the script also exits 1 on a wrong one).
const EXPECTED = {
  "acks.js": 'produce answered: COMPLETED, acked by ["broker-1","broker-2","broker-3"]',
  "fetch.js": "fetch-2: EXPIRED with 200 bytes (m0:200;)",
  "delayed.js": "order-3 still unpaid after 1000 ms: cancelling it",
  "subscription.js": 'expired only: ["job-1","job-3","job-5"]',
  "watch-many.js": "outcomes: 40 paid, 10 expired unpaid",
  "group-worker.js": 'handled: ["invoice-1","invoice-2","invoice-3"], invoice-1 on attempt 2',
};

let server;
before(async () => {
  server = await startServer({ toml: 'grace_s = 0.5\nlog_level = "WARNING"\n' });
});
after(async () => {
  await server.stop();
});

test("every example is tested", () => {
  const scripts = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith(".js"));
  assert.deepEqual(scripts.sort(), Object.keys(EXPECTED).sort());
});

for (const [script, line] of Object.entries(EXPECTED)) {
  test(`examples/node/${script} runs`, async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [path.join(EXAMPLES, script), server.target],
      { timeout: 60_000 },
    );
    assert.ok(stdout.split("\n").includes(line), stdout);
  });
}

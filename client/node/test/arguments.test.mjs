// The client checks its arguments at run time (a JavaScript caller has no type checker),
// and docs/clients.md's method table lists exactly the exported signatures.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { REPO, startServer } from "./server.mjs";

const { PurgatoryClient, InvalidArgumentError } = client;

// Methods of the prototype chain that are plumbing, not API (protected in TypeScript).
const INTERNAL = new Set(["constructor", "metadata", "stubFor", "name", "call"]);

/** Top-level comma split of a parameter list (braces, brackets and parentheses nest). */
function splitParams(text) {
  const out = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if ("{[(".includes(ch)) depth++;
    if ("}])".includes(ch)) depth--;
    if (ch === "," && depth === 0) {
      out.push(current.trim());
      current = "";
    } else current += ch;
  }
  if (current.trim() !== "") out.push(current.trim());
  return out;
}

/** name -> parameter names of the client's public methods, from the built code. */
function exportedSignatures() {
  const methods = new Map();
  for (let p = PurgatoryClient.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      const fn = Object.getOwnPropertyDescriptor(p, name).value;
      if (typeof fn !== "function" || INTERNAL.has(name) || methods.has(name)) continue;
      const source = fn.toString();
      const params = splitParams(source.slice(source.indexOf("(") + 1, source.indexOf(")")));
      methods.set(name, params.map((param) => param.split("=")[0].trim()));
    }
  }
  return methods;
}

/** [name, [parameter as documented]] for every signature in the Node methods table. */
function documentedSignatures() {
  const doc = fs.readFileSync(path.join(REPO, "docs", "clients.md"), "utf8");
  const section = doc.slice(doc.indexOf("## The Node.js client"));
  const table = section.slice(section.indexOf("| method | RPC | resolves to |"));
  const rows = table.split("\n").slice(2);
  const signatures = [];
  for (const row of rows) {
    if (!row.startsWith("|")) break;
    const first = row.slice(1).split(/(?<!\\)\|/)[0].replaceAll("\\|", "|");
    for (const [, name, params] of first.matchAll(/`(\w+)\((.*?)\)`/g)) {
      signatures.push([name, splitParams(params)]);
    }
  }
  return signatures;
}

test("docs/clients.md lists every public method with its exported parameters", () => {
  const exported = exportedSignatures();
  const documented = documentedSignatures();
  assert.ok(documented.length >= 30, `only ${documented.length} signatures found`);
  for (const [name, params] of documented) {
    assert.ok(exported.has(name), `documented ${name}() is not a method of PurgatoryClient`);
    const actual = exported.get(name);
    const shown = `${name}(${params.join(", ")}) vs the code's ${name}(${actual.join(", ")})`;
    assert.equal(params.length, actual.length, shown);
    params.forEach((param, i) => {
      const bare = param.replace(/\?$/, "").split("=")[0].trim();
      // A literal ({ ... }, [ ... ], undefined, alternatives) stands for any name.
      if (/^[A-Za-z_]\w*$/.test(bare) && bare !== "undefined") assert.equal(bare, actual[i], shown);
    });
  }
  const named = new Set(documented.map(([name]) => name));
  const undocumented = [...exported.keys()].filter((name) => !named.has(name));
  assert.deepEqual(undocumented, [], "public methods missing from docs/clients.md");
});

// Refused before anything is sent: the client's target has no server.
const offline = new PurgatoryClient("127.0.0.1:1", { deadlineMs: 2_000 });
after(() => offline.close());

function refused(pattern) {
  return (err) => {
    assert.ok(err instanceof InvalidArgumentError, `${err?.constructor?.name}: ${err?.message}`);
    assert.match(err.message, pattern);
    return true;
  };
}

test("an options object where the signal goes is refused, naming where it belongs", async () => {
  await assert.rejects(
    offline.checkAndComplete("k", { purgatory: "orders" }),
    refused(/checkAndComplete: signal is a Signal .*the purgatory goes in the third argument/),
  );
  await assert.rejects(
    offline.batchCheckAndComplete([["k", { purgatory: "orders" }]]),
    refused(/batchCheckAndComplete: signals\[0\]\[1\] is a Signal/),
  );
});

test("wrong types and unknown options are refused with the method and argument named", async () => {
  const cases = [
    [() => offline.tryCompleteElseWatch("k", 1000), /tryCompleteElseWatch: keys must be an array, got the string "k"/],
    [() => offline.tryCompleteElseWatch(["k"], "1000"), /tryCompleteElseWatch: timeoutMs must be an integer >= 0/],
    [() => offline.wait(["k"], -1), /wait: timeoutMs must be an integer >= 0, got a number -1/],
    [() => offline.wait(["k"], 10, { wait: true }), /wait: options has no option 'wait'/],
    [() => offline.tryCompleteElseWatch(["k"], 10, { purgatry: "x" }), /options has no option 'purgatry' \(it takes purgatory, /],
    [() => offline.tryCompleteElseWatch([1], 10), /keys\[0\] must be a string, got a number/],
    [() => offline.checkAndComplete("k", { amount: "3" }), /checkAndComplete: signal.amount must be an integer/],
    [() => offline.checkAndComplete("k", undefined, "orders"), /checkAndComplete: options must be an object, got the string "orders"/],
    [() => offline.checkAndComplete("k", undefined, { purgatory: 7 }), /options.purgatory must be a string/],
    [() => offline.forceComplete("op", "orders"), /forceComplete: options must be an object/],
    [() => offline.getOperation(42), /getOperation: operationId must be a string, got a number/],
    [() => offline.createPurgatory("p", { maxPendng: 3 }), /createPurgatory: config has no option 'maxPendng'/],
    [() => offline.cancel("op-1"), /cancel: operationIds must be an array/],
    [() => offline.reschedule("op", { timeoutMs: 5, deadline: 1 }), /reschedule: options has no option 'deadline'/],
    [() => offline.ack("g", 0), /ack: sequence must be an integer >= 1/],
    [() => offline.listOperations({ prefx: "a" }), /listOperations: filter has no option 'prefx'/],
    [() => offline.deleteGroup(""), /deleteGroup: group must not be empty/],
  ];
  for (const [call, pattern] of cases) await assert.rejects(call(), refused(pattern));
});

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

test("the options object, third, names the purgatory signalled", async () => {
  const c = new PurgatoryClient(server.target, { deadlineMs: 10_000 });
  try {
    await c.createPurgatory("args-other");
    await c.tryCompleteElseWatch(["k"], 60_000, { purgatory: "args-other", operationId: "a1" });
    assert.equal(await c.checkAndComplete("k", undefined, { purgatory: "args-other" }), 1);
    assert.equal((await c.getOperation("a1", { purgatory: "args-other" })).state, "COMPLETED");
  } finally {
    c.close();
  }
});

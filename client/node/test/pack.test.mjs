// The package as npm users get it: `npm pack` (which runs `prepare`, the build) holds what
// a consumer needs and nothing else (dist for both module systems with their types, the
// proto contract, README, LICENSE), source maps carry their sources, the README links
// nowhere outside the package; then the tarball installed into a fresh directory is used
// by an ES module and a CommonJS consumer against a real server, and type-checked from
// both (the exports map's `types` for `import` and for `require`). The install needs no
// registry: the dependencies come from npm's cache, at the versions of the lockfile.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { startServer, tempDir } from "./server.mjs";

const run = promisify(execFile);
const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const TSC = path.join(PKG, "node_modules", ".bin", "tsc");

let server;
let work;
let packed;
before(async () => {
  server = await startServer();
  work = tempDir("purgatory-pack-");
  const { stdout } = await run(NPM, ["pack", "--json", "--pack-destination", work], {
    cwd: PKG,
    timeout: 120_000,
  });
  packed = JSON.parse(stdout.slice(stdout.indexOf("[")))[0];
});
after(async () => {
  await server.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

test("npm pack: what a consumer needs, and nothing else", () => {
  const files = packed.files.map((f) => f.path).sort();
  for (const needed of [
    "LICENSE",
    "README.md",
    "package.json",
    "dist/cjs/index.js",
    "dist/cjs/index.d.ts",
    "dist/cjs/package.json",
    "dist/esm/index.js",
    "dist/esm/index.d.ts",
    "dist/esm/package.json",
    "proto/purgatory/v1/purgatory.proto",
  ]) {
    assert.ok(files.includes(needed), `${needed} missing from ${files.join(", ")}`);
  }
  const stray = files.filter((f) => !/^(LICENSE|README\.md|package\.json|dist\/|proto\/)/.test(f));
  assert.deepEqual(stray, []);
  const meta = JSON.parse(fs.readFileSync(path.join(PKG, "package.json"), "utf8"));
  assert.equal(meta.license, "Apache-2.0");
  assert.match(fs.readFileSync(path.join(PKG, "LICENSE"), "utf8"), /Apache License\s+Version 2\.0/);
  assert.equal(meta.scripts.prepare, "node scripts/build.js");
  assert.deepEqual(Object.keys(meta.exports["."]), ["import", "require", "default"]);
});

test("source maps embed their sources; the README links nowhere outside the package", () => {
  const maps = packed.files.map((f) => f.path).filter((f) => f.endsWith(".map"));
  assert.ok(maps.length > 20);
  for (const file of maps) {
    const map = JSON.parse(fs.readFileSync(path.join(PKG, file), "utf8"));
    assert.equal(map.sourcesContent?.length, map.sources.length, file);
    assert.ok(map.sourcesContent.every((s) => typeof s === "string" && s.length > 0), file);
  }
  const readme = fs.readFileSync(path.join(PKG, "README.md"), "utf8");
  const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]);
  assert.deepEqual(links.filter((l) => !/^(https?:|#)/.test(l)), []);
});

const ESM_CONSUMER = `
import { PurgatoryClient, Condition, InvalidArgumentError } from "@purgatory/client";
const client = new PurgatoryClient(process.argv[2]);
const waiting = client.wait(["esm-k"], 10_000, { condition: Condition.anyKey() });
while ((await client.checkAndComplete("esm-k")) === 0) await new Promise((r) => setTimeout(r, 10));
const status = await waiting;
const seen = [];
for await (const e of client.watchMany([{ keys: ["esm-w"], timeoutMs: 20 }])) seen.push(e.state);
let refused = "";
try { await client.getPurgatory(""); } catch (err) { refused = err instanceof InvalidArgumentError ? "typed" : String(err); }
client.close();
console.log(JSON.stringify({ kind: "esm", state: status.state, seen, refused }));
`;

const CJS_CONSUMER = `
const { PurgatoryClient, InvalidArgumentError } = require("@purgatory/client");
(async () => {
  const client = new PurgatoryClient(process.argv[2]);
  const d = client.dispatcher();
  const waiting = client.wait(["cjs-k"], 10_000);
  let done = 0;
  while (done === 0) done = await d.signal("cjs-k");
  const status = await waiting;
  await d.shutdown();
  const seen = [];
  for await (const e of client.watchMany([{ keys: ["cjs-w"], timeoutMs: 20 }])) seen.push(e.state);
  let refused = "";
  try { await client.getPurgatory(""); } catch (err) { refused = err instanceof InvalidArgumentError ? "typed" : String(err); }
  client.close();
  console.log(JSON.stringify({ kind: "cjs", state: status.state, seen, refused }));
})();
`;

// Type-checked only: the declarations each module system resolves through the exports map.
const TYPED = `
const client = new PurgatoryClient("127.0.0.1:1");
const ack: Promise<SessionAck> = client.session().send({ signals: ["k"] });
const d: Delivery | undefined = undefined;
const n: Promise<number> = client.dispatcher().signal("k");
const page: Promise<OperationPage> = client.listOperations({ prefix: "a" });
void ack; void d; void n; void page;
`;

/**
 * A fresh app depending on the tarball, with a lockfile that pins the package's runtime
 * dependencies to the versions of client/node/package-lock.json (what `make node-deps`
 * installed with `npm ci`): `npm ci` then resolves everything from npm's cache, with no
 * registry round trip (`--prefer-offline`: the registry only if the cache lacks one).
 */
function freshApp(app, tarball) {
  const lock = JSON.parse(fs.readFileSync(path.join(PKG, "package-lock.json"), "utf8"));
  const own = lock.packages[""];
  const spec = `file:${tarball}`;
  const integrity = `sha512-${createHash("sha512").update(fs.readFileSync(path.join(app, tarball))).digest("base64")}`;
  const packages = {
    "": { name: "app", dependencies: { "@purgatory/client": spec } },
    "node_modules/@purgatory/client": {
      version: own.version,
      resolved: spec,
      integrity,
      license: own.license,
      dependencies: own.dependencies,
      engines: own.engines,
    },
  };
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where.startsWith("node_modules/") && !entry.dev) packages[where] = entry;
  }
  const manifest = { name: "app", private: true, dependencies: { "@purgatory/client": spec } };
  fs.writeFileSync(path.join(app, "package.json"), `${JSON.stringify(manifest)}\n`);
  fs.writeFileSync(
    path.join(app, "package-lock.json"),
    `${JSON.stringify({ name: "app", lockfileVersion: 3, requires: true, packages }, null, 1)}\n`,
  );
}

test("the tarball installed into a fresh directory: an ESM and a CJS consumer", async () => {
  const app = path.join(work, "app");
  fs.mkdirSync(app);
  fs.copyFileSync(path.join(work, packed.filename), path.join(app, packed.filename));
  freshApp(app, packed.filename);
  await run(NPM, ["ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], {
    cwd: app,
    timeout: 120_000,
  });
  assert.ok(!fs.existsSync(path.join(app, "node_modules", "@purgatory", "client", "src")));
  fs.writeFileSync(path.join(app, "consumer.mjs"), ESM_CONSUMER);
  fs.writeFileSync(path.join(app, "consumer.cjs"), CJS_CONSUMER);
  for (const [file, kind] of [
    ["consumer.mjs", "esm"],
    ["consumer.cjs", "cjs"],
  ]) {
    const { stdout } = await run(process.execPath, [file, server.target], { cwd: app, timeout: 60_000 });
    const result = JSON.parse(stdout.trim().split("\n").pop());
    assert.deepEqual(result, { kind, state: "COMPLETED", seen: ["EXPIRED"], refused: "typed" });
  }
  const names = "PurgatoryClient, type SessionAck, type Delivery, type OperationPage";
  fs.writeFileSync(path.join(app, "typed.mts"), `import { ${names} } from "@purgatory/client";\n${TYPED}`);
  fs.writeFileSync(
    path.join(app, "typed.cts"),
    `import { ${names} } from "@purgatory/client";\n${TYPED}`,
  );
  fs.writeFileSync(
    path.join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        module: "nodenext",
        moduleResolution: "nodenext",
        target: "es2022",
        strict: true,
        noEmit: true,
        typeRoots: [path.join(PKG, "node_modules", "@types")],
        types: ["node"],
      },
      files: ["typed.mts", "typed.cts"],
    }),
  );
  // Both declaration trees are read: dist/esm for typed.mts, dist/cjs for typed.cts.
  const { stdout } = await run(TSC, ["-p", app, "--listFiles"], {
    cwd: app,
    timeout: 60_000,
    maxBuffer: 16 << 20,
  });
  const listed = stdout.split("\n").map((f) => f.trim());
  for (const tree of ["esm", "cjs"]) {
    const entry = `node_modules/@purgatory/client/dist/${tree}/index.d.ts`;
    assert.ok(listed.some((f) => f.endsWith(entry)), `${entry} not in:\n${stdout}`);
  }
});

// Every RPC of the proto has a typed client method (the proto is the source of truth: a
// new RPC without a method fails here), in both builds.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import cjs from "../dist/cjs/index.js";
import * as esm from "../dist/esm/index.js";
import { REPO } from "./server.mjs";

// The RPCs whose methods are not the RPC's name in camelCase.
const METHODS = {
  Subscribe: ["subscribe", "joinGroup"],
  Session: ["session", "watchMany", "dispatcher"],
  ListOperations: ["listOperations", "iterOperations"],
  // ackBatch sends its requests on an AckStream (AckBatch where the stream cannot answer).
  AckStream: ["ackBatch"],
};

test("every RPC of PurgatoryService has a method, typed in both builds", () => {
  const proto = fs.readFileSync(path.join(REPO, "proto", "purgatory", "v1", "purgatory.proto"), "utf8");
  const service = proto.slice(proto.indexOf("service PurgatoryService {"));
  const rpcs = [...service.slice(0, service.indexOf("\n}")).matchAll(/^\s*rpc (\w+)\(/gm)].map((m) => m[1]);
  assert.ok(rpcs.length >= 24, rpcs.join());
  const declarations = ["cjs", "esm"].map((tree) =>
    ["client", "base", "methods"]
      .map((f) => fs.readFileSync(path.join(REPO, "client", "node", "dist", tree, `${f}.d.ts`), "utf8"))
      .join("\n"),
  );
  for (const rpc of rpcs) {
    for (const method of METHODS[rpc] ?? [rpc[0].toLowerCase() + rpc.slice(1)]) {
      for (const build of [cjs, esm]) {
        assert.equal(typeof build.PurgatoryClient.prototype[method], "function", `${rpc}: ${method}`);
      }
      for (const d of declarations) assert.match(d, new RegExp(`\\b${method}\\(`), `${rpc}: ${method}`);
    }
  }
});

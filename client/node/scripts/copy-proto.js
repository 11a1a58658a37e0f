// Copies the service's .proto files (the single source of truth, ../../proto) into this
// package so that the built client is self-contained: dist/ loads them from ./proto.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const src = path.resolve(__dirname, "..", "..", "..", "proto", "purgatory", "v1");
const dst = path.resolve(__dirname, "..", "proto", "purgatory", "v1");
fs.mkdirSync(dst, { recursive: true });
for (const name of fs.readdirSync(src)) {
  if (name.endsWith(".proto")) fs.copyFileSync(path.join(src, name), path.join(dst, name));
}

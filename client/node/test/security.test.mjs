// TLS, mutual TLS and bearer tokens against real servers started with --tls-* flags and
// [[auth.tokens]]. Certificates are made at test time by the Python tests' own helper
// (tests/security/certs.py): a CA, a server certificate for 127.0.0.1, a client
// certificate from the same CA and one from an unrelated CA.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as path from "node:path";
import { before, test } from "node:test";

import client from "../dist/cjs/index.js";
import { REPO, startServer, tempDir } from "./server.mjs";

const { PurgatoryClient, UnauthenticatedError, PermissionDeniedError, UnavailableError } = client;

const ADMIN = "node-admin-token-1";
const WATCHER = "node-watcher-token-2";
let certs;

before(() => {
  const dir = tempDir("purgatory-node-certs-");
  execFileSync(
    path.join(REPO, ".venv", "bin", "python"),
    [
      "-c",
      "import sys, pathlib; from tests.security.certs import make_certs; make_certs(pathlib.Path(sys.argv[1]))",
      dir,
    ],
    { cwd: REPO },
  );
  const f = (name) => path.join(dir, name);
  certs = {
    ca: f("ca.crt"),
    serverCert: f("server.crt"),
    serverKey: f("server.key"),
    clientCert: f("client.crt"),
    clientKey: f("client.key"),
    rogueCert: f("rogue.crt"),
    rogueKey: f("rogue.key"),
  };
});

const PLAIN = 'grace_s = 0.2\nlog_level = "WARNING"\n';

async function withServer(options, body) {
  const server = await startServer(options);
  try {
    await body(server);
  } finally {
    await server.stop();
  }
}

async function using(target, options, body) {
  const c = new PurgatoryClient(target, { deadlineMs: 5_000, ...options });
  try {
    return await body(c);
  } finally {
    c.close();
  }
}

test("TLS: the client verifies the server against the CA; plaintext is refused", async () => {
  const args = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey];
  await withServer({ toml: PLAIN, args }, async (server) => {
    await using(server.target, { tls: { caFile: certs.ca } }, async (c) => {
      assert.equal((await c.getPurgatory()).name, "default");
      const w = c.wait(["tls-k"], 10_000);
      await new Promise((r) => setTimeout(r, 50));
      while ((await c.checkAndComplete("tls-k")) === 0) await new Promise((r) => setTimeout(r, 10));
      assert.equal((await w).state, "COMPLETED");
    });
    await using(server.target, { tls: false }, async (c) => {
      await assert.rejects(c.getPurgatory(), UnavailableError);
    });
    // A CA that did not sign the server's certificate: the handshake fails.
    await using(server.target, { tls: { caFile: certs.rogueCert } }, async (c) => {
      await assert.rejects(c.getPurgatory(), UnavailableError);
    });
  });
});

test("TLS from PURGATORY_TLS_CA when no option is given", async () => {
  const args = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey];
  await withServer({ toml: PLAIN, args }, async (server) => {
    process.env.PURGATORY_TLS_CA = certs.ca;
    try {
      await using(server.target, {}, async (c) => {
        assert.equal((await c.getPurgatory()).name, "default");
      });
    } finally {
      delete process.env.PURGATORY_TLS_CA;
    }
  });
});

test("mutual TLS: a client certificate from the server's client CA is required", async () => {
  const args = [
    "--tls-cert", certs.serverCert,
    "--tls-key", certs.serverKey,
    "--tls-client-ca", certs.ca,
  ];
  await withServer({ toml: PLAIN, args }, async (server) => {
    const mine = { caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey };
    await using(server.target, { tls: mine }, async (c) => {
      assert.equal((await c.getPurgatory()).name, "default");
    });
    await using(server.target, { tls: { caFile: certs.ca } }, async (c) => {
      await assert.rejects(c.getPurgatory(), UnavailableError);
    });
    const rogue = { caFile: certs.ca, certFile: certs.rogueCert, keyFile: certs.rogueKey };
    await using(server.target, { tls: rogue }, async (c) => {
      await assert.rejects(c.getPurgatory(), UnavailableError);
    });
  });
});

test("tokens: none or a wrong one is UNAUTHENTICATED, a missing permission PERMISSION_DENIED", async () => {
  const toml = `${PLAIN}
[[auth.tokens]]
name = "admin"
token = "${ADMIN}"
permissions = ["admin"]

[[auth.tokens]]
name = "watcher"
token = "${WATCHER}"
permissions = ["watch"]
`;
  await withServer({ toml }, async (server) => {
    await using(server.target, { token: ADMIN }, async (c) => {
      assert.equal((await c.getPurgatory()).name, "default");
    });
    await using(server.target, {}, async (c) => {
      const err = await c.getPurgatory().then(() => null, (e) => e);
      assert.ok(err instanceof UnauthenticatedError, `got ${err}`);
    });
    await using(server.target, { token: "not-a-token" }, async (c) => {
      await assert.rejects(c.checkAndComplete("k"), UnauthenticatedError);
    });
    await using(server.target, { token: WATCHER }, async (c) => {
      const status = await c.tryCompleteElseWatch(["tok-k"], 60_000, { operationId: "tok-1" });
      assert.equal(status.state, "WATCHING");
      const err = await c.checkAndComplete("tok-k").then(() => null, (e) => e);
      assert.ok(err instanceof PermissionDeniedError, `got ${err}`);
      await assert.rejects(take1(c.subscribe({ afterSequence: 0 })), PermissionDeniedError);
    });
    process.env.PURGATORY_TOKEN = ADMIN; // the default when no token option is given
    try {
      await using(server.target, {}, async (c) => {
        assert.equal((await c.forceComplete("tok-1")).completed, true);
      });
    } finally {
      delete process.env.PURGATORY_TOKEN;
    }
  });
});

test("a token over TLS", async () => {
  const toml = `${PLAIN}
[[auth.tokens]]
name = "admin"
token = "${ADMIN}"
permissions = ["admin"]
`;
  const args = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey];
  await withServer({ toml, args }, async (server) => {
    await using(server.target, { tls: { caFile: certs.ca }, token: ADMIN }, async (c) => {
      assert.equal((await c.getPurgatory()).name, "default");
    });
    await using(server.target, { tls: { caFile: certs.ca } }, async (c) => {
      await assert.rejects(c.getPurgatory(), UnauthenticatedError);
    });
  });
});

async function take1(stream) {
  for await (const event of stream) return event;
  return undefined;
}

// grpc-js sends an IP target as the TLS ServerName, which Node deprecates (DEP0123); the
// certificate is still checked against the IP. `npm test` and `make node-test` run node with
// --disable-warning=DEP0123: a TLS client run with this process's flags prints nothing.
test("TLS to 127.0.0.1 prints no DeprecationWarning under the test runner's flags", async () => {
  const args = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey];
  await withServer({ toml: PLAIN, args }, async (server) => {
    const dist = path.join(REPO, "client", "node", "dist", "cjs", "index.js");
    const script = `
      const { PurgatoryClient } = require(${JSON.stringify(dist)});
      const c = new PurgatoryClient(${JSON.stringify(server.target)}, { tls: { caFile: ${JSON.stringify(certs.ca)} } });
      c.getPurgatory().then((info) => { console.log(info.name); c.close(); });`;
    const child = spawnSync(process.execPath, [...process.execArgv, "-e", script], {
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(child.stdout.trim(), "default", child.stderr);
    assert.doesNotMatch(child.stderr, /DeprecationWarning/);
  });
});

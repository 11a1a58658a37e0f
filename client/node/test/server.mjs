// A real Python purgatory server for the Node tests: `purgatory-server` from the repository's
// .venv (or $PURGATORY_SERVER), listening on 127.0.0.1:0, its port read from --port-file.
// Every server is stopped by the test that started it, and killed when the test process
// exits, so no server outlives a run.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..", "..");
const SERVER_BIN = process.env.PURGATORY_SERVER ?? path.join(REPO, ".venv", "bin", "purgatory-server");

const running = new Set();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

// Small limits make every limit cheap to reach; the same spirit as tests/service/helpers.py.
export const TEST_TOML = `
grace_s = 0.5
log_level = "WARNING"

[limits]
max_key_length = 64
max_operation_id_length = 64
max_payload_bytes = 256
max_purgatories = 16
max_subscribers = 4
subscriber_buffer = 4
min_timeout_ms = 5

[defaults]
max_pending = 100
retained_events = 200
`;

export function tempDir(prefix = "purgatory-node-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

async function until(predicate, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = predicate();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Start a server. `toml` is its configuration file's text; `args` extra flags; `listen`
 * a fixed address (a restart on the same port), else 127.0.0.1:0. Resolves to
 * { target, port, dataDir, stop() }.
 */
export async function startServer({ toml = TEST_TOML, args = [], listen, dataDir, env } = {}) {
  const dir = tempDir();
  const data = dataDir ?? path.join(dir, "data");
  const config = path.join(dir, "server.toml");
  const portFile = path.join(dir, "port");
  fs.writeFileSync(config, toml);
  const child = spawn(
    SERVER_BIN,
    [
      "--listen", listen ?? "127.0.0.1:0",
      "--config", config,
      "--data-dir", data,
      "--port-file", portFile,
      ...args,
    ],
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...(env ?? {}) } },
  );
  running.add(child);
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  let exited = null;
  child.on("exit", (code, signal) => {
    exited = { code, signal };
    running.delete(child);
  });
  try {
    await until(
      () => {
        if (exited) throw new Error(`purgatory-server exited (${JSON.stringify(exited)}): ${stderr}`);
        const text = fs.existsSync(portFile) ? fs.readFileSync(portFile, "utf8").trim() : "";
        return text !== "" ? text : null;
      },
      30_000,
      "purgatory-server to write its port file",
    );
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
  const port = Number(fs.readFileSync(portFile, "utf8").trim());
  return {
    port,
    pid: child.pid,
    target: `127.0.0.1:${port}`,
    dataDir: data,
    /** Graceful stop (SIGTERM): waiting long-polls and streams end with UNAVAILABLE. */
    async stop() {
      if (exited) return exited;
      child.kill("SIGTERM");
      try {
        await until(() => exited, 15_000, "purgatory-server to stop");
      } catch (err) {
        child.kill("SIGKILL");
        throw err;
      }
      return exited;
    },
  };
}

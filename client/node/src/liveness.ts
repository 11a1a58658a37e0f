/**
 * Liveness of long-lived streams (Subscribe, Session, worker-group members), as the Python
 * clients' purgatory_client/_liveness.py.
 *
 * The server sends a heartbeat on a stream that has been idle for the interval the client
 * asked for. A client that asked for heartbeats may also give a dead-stream deadline: a
 * stream that stays silent that long (no message, no heartbeat) is cancelled and counts as
 * UNAVAILABLE, so a half-open TCP connection or a proxy that dropped the stream silently
 * is noticed and the stream re-opened (resumed) instead of waiting forever.
 */
import { status as Status } from "@grpc/grpc-js";

import { invalidArgument, UnavailableError } from "./errors.js";

/** The dead-stream deadline in ms (undefined: never), checked against the interval. */
export function deadAfter(
  heartbeatIntervalMs: number | undefined,
  deadAfterMs: number | undefined,
): number | undefined {
  if (deadAfterMs === undefined) return undefined;
  if (!(deadAfterMs > 0)) throw invalidArgument("deadAfterMs", `${deadAfterMs} is not positive`);
  if (!heartbeatIntervalMs) throw invalidArgument("deadAfterMs", "needs heartbeatIntervalMs");
  return deadAfterMs;
}

/** The error a silent stream counts as (resumed like a dropped connection). */
export function deadStream(deadAfterMs: number): UnavailableError {
  return new UnavailableError(
    Status.UNAVAILABLE,
    `no event or heartbeat for ${deadAfterMs} ms: the stream is treated as dead`,
  );
}

/**
 * Calls `onDead` once the stream has been silent for `deadAfterMs` (never when undefined).
 * `alive()` on every message pushes the deadline back; `stop()` when the stream ends. The
 * timer is unref'd: it never keeps a process alive by itself.
 */
export class Watchdog {
  fired = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly deadAfterMs: number | undefined,
    private readonly onDead: () => void,
  ) {
    this.alive();
  }

  alive(): void {
    if (this.deadAfterMs === undefined || this.fired) return;
    if (this.timer !== undefined) {
      this.timer.refresh();
      return;
    }
    this.timer = setTimeout(() => {
      this.fired = true;
      this.onDead();
    }, this.deadAfterMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

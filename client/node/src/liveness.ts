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
 * Calls `onDead` once the stream has been silent for `deadAfterMs` (never when undefined)
 * while its reader waits for a message. The reader calls `pause()` when a message arrives
 * and `alive()` when it waits for the next one: time spent handing a message on (a
 * consumer that is slow, a full queue) is the reader's, not the stream's silence. `stop()`
 * when the stream ends. The timer is unref'd: it never keeps a process alive by itself.
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

  /** The reader waits for a message: the deadline starts now. */
  alive(): void {
    if (this.deadAfterMs === undefined || this.fired) return;
    this.pause();
    this.timer = setTimeout(() => {
      this.fired = true;
      this.onDead();
    }, this.deadAfterMs);
    this.timer.unref();
  }

  /** A message arrived: no deadline while the reader hands it on. */
  pause(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  stop(): void {
    this.pause();
  }
}

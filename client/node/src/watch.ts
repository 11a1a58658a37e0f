/**
 * `watchMany`: many operations registered on one Session stream, each outcome yielded as
 * it ends, resumed after a cut, as the Python client's watch_many.
 *
 * Watches without an id get a client-made one ("wm-<uuid>"), so that after a dropped
 * stream (the server's slow-reader RESOURCE_EXHAUSTED, or UNAVAILABLE across a restart)
 * a new stream re-sends exactly the watches that still owe an outcome, by id.
 * Registration is idempotent by operation id: the server registers nothing new and
 * answers one that ended meanwhile with its outcome at once. Each outcome is yielded once.
 */
import { randomUUID } from "node:crypto";
import { status as Status } from "@grpc/grpc-js";

import { backoffMs, sleep } from "./connection.js";
import {
  invalidArgument,
  PurgatoryError,
  ResourceExhaustedError,
  ServerError,
  UnavailableError,
} from "./errors.js";
import type { Event, OperationSpec, RetryPolicy } from "./models.js";
import { OWNER } from "./routing.js";
import type { Session, SessionAck } from "./session.js";

/** Watches per frame: ~100 per message is where the transport carries most. */
export const DEFAULT_FRAME_SIZE = 100;

/** The watches of one `watchMany` call that still owe an outcome. */
export class WatchSet {
  private readonly open = new Map<string, OperationSpec>();

  constructor(specs: Iterable<OperationSpec>) {
    for (const given of specs) {
      const spec = given.operationId ? given : { ...given, operationId: `wm-${randomUUID()}` };
      const id = spec.operationId as string;
      if (this.open.has(id)) throw invalidArgument("operationId", `${JSON.stringify(id)} repeated`);
      this.open.set(id, spec);
    }
  }

  get size(): number {
    return this.open.size;
  }

  /** The watches still open, in frames of `frameSize`. */
  *frames(frameSize: number): Generator<OperationSpec[]> {
    const pending = [...this.open.values()];
    for (let start = 0; start < pending.length; start += frameSize) {
      yield pending.slice(start, start + frameSize);
    }
  }

  /** Record an outcome; false if it is not ours or was seen already (a re-send's). */
  ended(event: Event): boolean {
    return this.open.delete(event.operationId);
  }
}

/** After a stream ended with `error`: a new stream and a re-send by id will help. */
export function isResumable(error: unknown): boolean {
  return error instanceof ResourceExhaustedError || error instanceof UnavailableError;
}

/** Re-open delays: `attempts` in a row without progress, doubling; progress resets it. */
export class Backoff {
  private failures = 0;

  constructor(private readonly policy: Required<RetryPolicy>) {}

  progress(): void {
    this.failures = 0;
  }

  /** Ms to wait before re-opening; throws `error` if that will not help. */
  delay(error: unknown): number {
    if (!isResumable(error) || this.failures >= this.policy.attempts) throw error;
    const delay = backoffMs(this.policy, this.failures);
    this.failures++;
    // A refusal naming the owner (routing.ts): the re-opened stream goes there at once.
    return (error as PurgatoryError).metadata[OWNER] ? 0 : delay;
  }
}

/** Outcomes and wake-ups handed from a session's reader to the generator. */
class Mailbox {
  private ready: Event[] = [];
  private waiter: (() => void) | undefined;
  private woken = false;

  readonly put = (event: Event): void => {
    this.ready.push(event);
    this.wake();
  };

  readonly wake = (): void => {
    this.woken = true;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  };

  /** Wait for an outcome or a wake-up, then take every outcome there is. */
  async take(): Promise<Event[]> {
    if (!this.woken) await new Promise<void>((resolve) => (this.waiter = resolve));
    this.woken = false;
    const ready = this.ready;
    this.ready = [];
    return ready;
  }

  get empty(): boolean {
    return this.ready.length === 0;
  }
}

export async function* watchMany(
  openSession: (onOutcome: (event: Event) => void) => Session,
  specs: Iterable<OperationSpec>,
  frameSize: number,
  policy: Required<RetryPolicy>,
): AsyncGenerator<Event, void, undefined> {
  if (!(frameSize >= 1)) throw invalidArgument("frameSize", `${frameSize} is not at least 1`);
  const watches = new WatchSet(specs);
  const backoff = new Backoff(policy);
  while (watches.size > 0) {
    const mailbox = new Mailbox();
    const session = openSession(mailbox.put);
    session.onEnd(mailbox.wake);
    let delay: number;
    try {
      const answered: SessionAck[] = [];
      for (const frame of watches.frames(frameSize)) {
        session.send({ watches: frame }).then(
          (ack) => {
            answered.push(ack);
            mailbox.wake();
          },
          mailbox.wake, // the stream ended: session.error says why
        );
      }
      session.doneWriting();
      for (;;) {
        for (const event of await mailbox.take()) {
          if (watches.ended(event)) {
            backoff.progress();
            yield event;
          }
        }
        const refused = answered.find((ack) => ack.error !== null);
        if (refused?.error) throw refused.error;
        if (session.finished && mailbox.empty) break;
      }
      if (session.error === undefined) {
        if (watches.size > 0) {
          throw new ServerError(Status.INTERNAL, `${watches.size} watches left unanswered`);
        }
        return;
      }
      delay = backoff.delay(session.error);
    } finally {
      await session.close();
    }
    await sleep(delay);
  }
}

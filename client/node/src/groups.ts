/**
 * Worker groups (docs/service.md "Worker groups"), as the Python client's _async_groups:
 * a member's stream of deliveries, and the models of groups and dead letters.
 *
 * `client.joinGroup(group)` resolves once the member has joined (every outcome published
 * from then on reaches the group) to a GroupStream: an async iterable of Delivery, each an
 * Event leased to this member with `ack()`, `nack()` and `extendLease()` bound to the
 * client (`client.nack` / `client.ackBatch`: one, or many acks and nacks in one call). A
 * lease that is neither acked nor extended runs out and the outcome goes to another member
 * (`attempt` grows: act idempotently); after the group's max attempts it becomes a dead
 * letter (`listDeadLetters`, `redrive`, `discardDeadLetters`). A stream dropped by
 * UNAVAILABLE (a server restart) is re-joined with the client's `resume` back-off; other
 * errors are thrown. Leases held when a stream drops run out and are redelivered
 * (at-least-once). `close()` leaves. `selection` (priorities, an ordering key, a rate
 * limit) is given on the join that creates a group (docs/service.md "Priorities, ordering
 * keys and rate limits").
 */
import type { ClientReadableStream, Metadata } from "@grpc/grpc-js";

import * as wire from "./convert.js";
import { fromGrpcError, UnavailableError } from "./errors.js";
import { Watchdog, deadStream } from "./liveness.js";
import type { Event } from "./models.js";
import { Backoff } from "./watch.js";
import { sleep } from "./connection.js";

/** An outcome leased to this member (or, from listDeadLetters, a dead letter). */
export interface Delivery extends Event {
  /** 1 on the first delivery, 2 on the first redelivery, ... (a dead letter: attempts got). */
  readonly attempt: number;
  /** When the lease ends unless acked or extended, Unix epoch ms (server clock). */
  readonly leaseDeadlineMs: number;
  readonly group: string;
  /** True for an entry of listDeadLetters. */
  readonly deadLetter: boolean;
  /** From a group with a selection: the outcome's priority (higher first; 0: none). */
  readonly priority: number;
  /** From a group with an ordering key: the outcome's key ("": none). */
  readonly orderingKey: string;
  /** End the delivery (a dead letter: discard it); FailedPreconditionError if the lease
   * was lost meanwhile (delivered again). */
  ack(): Promise<void>;
  /** End the delivery unacked: offered again after `delayMs` (unset: the group's backoff,
   * or at once), or a dead letter now (`deadLetter`). A dead letter stays one. */
  nack(options?: { delayMs?: number; deadLetter?: boolean }): Promise<NackResult>;
  /** Push the lease's deadline to now + `visibilityTimeoutMs` (0: the group's); resolves
   * to the new deadline (epoch ms). */
  extendLease(visibilityTimeoutMs?: number): Promise<number>;
}

/** A group's retry backoff (BullMQ's `backoff`): after the n-th delivery that ended
 * unacked, `delayMs` ("fixed") or `delayMs * 2^(n-1)` ("exponential"), at most
 * `maxDelayMs` (0: 12 h), the share `jitter` (0..1) of it drawn at random. */
export interface RetryBackoff {
  readonly type: "fixed" | "exponential";
  readonly delayMs: number;
  readonly maxDelayMs?: number;
  readonly jitter?: number;
}

/** What a nack did: a dead letter now, or offered again at `redeliverAtMs` (server clock). */
export interface NackResult {
  readonly deadLetter: boolean;
  readonly redeliverAtMs: number;
}

/** One entry of ackBatch: an ack, or with `nack` a nack (as Delivery.nack's options). */
export interface AckEntry {
  readonly sequence: number;
  readonly attempt?: number;
  readonly nack?: boolean;
  readonly delayMs?: number;
  readonly deadLetter?: boolean;
}

/** One entry's answer: `code` 0 (`ok`), or its gRPC status code (5 NOT_FOUND: not held;
 * 9 FAILED_PRECONDITION: lease lost) with `message`; a nack's outcome. */
export interface AckResult extends NackResult {
  readonly sequence: number;
  readonly ok: boolean;
  readonly code: number;
  readonly message: string;
}

/** The server's prefetch when a join gives none. */
export const DEFAULT_PREFETCH = 16;

const BACKOFF_TYPES = { fixed: 1, exponential: 2 } as const;

/** A join's backoff as the wire spells it (an unknown type: InvalidArgumentError). */
export function backoffToWire(
  backoff: RetryBackoff,
  invalid: (field: string, problem: string) => Error,
): Record<string, number> {
  const type = BACKOFF_TYPES[backoff.type];
  if (type === undefined) throw invalid("backoff.type", "must be 'fixed' or 'exponential'");
  return {
    type,
    delayMs: backoff.delayMs,
    maxDelayMs: backoff.maxDelayMs ?? 0,
    jitter: backoff.jitter ?? 0,
  };
}

function backoffFromWire(m: wire.WireMessage | null | undefined): RetryBackoff | null {
  if (!m || !m.type) return null;
  return Object.freeze({
    type: m.type === 1 ? "fixed" : "exponential",
    delayMs: m.delayMs,
    maxDelayMs: m.maxDelayMs,
    jitter: m.jitter,
  });
}

export function ackResultFromWire(m: wire.WireMessage): AckResult {
  return Object.freeze({
    sequence: m.sequence,
    ok: m.code === 0,
    code: m.code,
    message: m.message,
    deadLetter: m.deadLetter,
    redeliverAtMs: m.redeliverAtMs,
  });
}

export interface GroupInfo {
  readonly name: string;
  readonly visibilityTimeoutMs: number;
  readonly maxAttempts: number;
  /** Outcomes waiting for a member, leased, and dead. */
  readonly ready: number;
  readonly leased: number;
  readonly deadLetters: number;
  /** Connected members. */
  readonly members: number;
  readonly lastSequence: number;
  /** The group's selection (undefined: none). */
  readonly selection?: GroupSelection;
  /** Outcomes waiting out a backoff or a nack's delay. */
  readonly retrying: number;
  /** The group's retry backoff; null: none. */
  readonly backoff: RetryBackoff | null;
}

/** Where an outcome's key comes from: its operation's first watched key, or its
 * operation id up to a separator ("order-17/ship" with "/": "order-17"). */
export type KeySource = { readonly firstKey: true } | { readonly operationIdSeparator: string };

/** Outcomes matching every non-empty field get `priority` (0 to 1000000, higher first). */
export interface GroupPriority {
  readonly priority: number;
  readonly operationIdPrefix?: string;
  readonly key?: string;
}

/** At most `max` deliveries in any `windowMs`; per key with `perKey`. */
export interface GroupRateLimit {
  readonly max: number;
  readonly windowMs: number;
  readonly perKey?: KeySource;
}

/** Which ready outcome a group delivers next (fixed at the group's creation). */
export interface GroupSelection {
  /** The first matching rule gives an outcome's priority (none: 0). */
  readonly priorities?: readonly GroupPriority[];
  /** One outcome per key in flight, in sequence order. */
  readonly orderingKey?: KeySource;
  readonly rateLimit?: GroupRateLimit;
}

function sourceToWire(source: KeySource): Record<string, unknown> {
  return "operationIdSeparator" in source
    ? { operationIdSeparator: source.operationIdSeparator }
    : { firstKey: true };
}

function sourceFromWire(m: wire.WireMessage): KeySource {
  return m.source === "operationIdSeparator"
    ? { operationIdSeparator: m.operationIdSeparator }
    : { firstKey: true };
}

export function selectionToWire(selection: GroupSelection): Record<string, unknown> {
  const rate = selection.rateLimit;
  return {
    priorities: (selection.priorities ?? []).map((p) => ({
      priority: p.priority,
      operationIdPrefix: p.operationIdPrefix ?? "",
      key: p.key ?? "",
    })),
    orderingKey: selection.orderingKey ? sourceToWire(selection.orderingKey) : undefined,
    rateLimit: rate
      ? {
          max: rate.max,
          windowMs: rate.windowMs,
          perKey: rate.perKey ? sourceToWire(rate.perKey) : undefined,
        }
      : undefined,
  };
}

function selectionFromWire(m: wire.WireMessage): GroupSelection {
  const rate = m.rateLimit;
  const priorities = (m.priorities as wire.WireMessage[]).map((p) =>
    Object.freeze({ priority: p.priority, operationIdPrefix: p.operationIdPrefix, key: p.key }),
  );
  return Object.freeze({
    priorities: Object.freeze(priorities),
    ...(m.orderingKey ? { orderingKey: sourceFromWire(m.orderingKey) } : {}),
    ...(rate
      ? {
          rateLimit: Object.freeze({
            max: rate.max,
            windowMs: rate.windowMs,
            ...(rate.perKey ? { perKey: sourceFromWire(rate.perKey) } : {}),
          }),
        }
      : {}),
  });
}

export interface DeadLetterPage {
  readonly deadLetters: readonly Delivery[];
  /** Non-zero: pass as `afterSequence` for the next page. */
  readonly nextAfterSequence: number;
}

export interface JoinOptions {
  /** The lease of each delivery; 0: the group's (on creation: 30000). */
  visibilityTimeoutMs?: number;
  /** Deliveries before an unacked outcome becomes a dead letter; 0: the group's (5). */
  maxAttempts?: number;
  /** Leases this member may hold at once; 0: 16. */
  prefetch?: number;
  purgatory?: string;
  /** Non-zero: the server sends heartbeats on an idle stream (`stream.heartbeats`). */
  heartbeatIntervalMs?: number;
  /** Needs heartbeats: a stream silent that long is re-joined like a dropped one. */
  deadAfterMs?: number;
  /** Priorities, an ordering key, a rate limit: for a group this join creates (unset:
   * the group's; another one than the group's: FailedPreconditionError). */
  selection?: GroupSelection;
  /** The group's retry backoff (creation; unset: none, or the group's). */
  backoff?: RetryBackoff;
}

/** What a Delivery's ack()/extendLease() call: the client's unary methods. */
export interface LeaseOps {
  ack(
    group: string,
    sequence: number,
    options: { attempt: number; purgatory: string },
  ): Promise<void>;
  extendLease(
    group: string,
    sequence: number,
    attempt: number,
    options: { visibilityTimeoutMs: number; purgatory: string },
  ): Promise<number>;
  nack(
    group: string,
    sequence: number,
    options: { attempt: number; purgatory: string; delayMs?: number; deadLetter?: boolean },
  ): Promise<NackResult>;
}

export function deliveryFromWire(m: wire.WireMessage, ops: LeaseOps): Delivery {
  const event = wire.eventFromWire(m, "");
  const delivery: Delivery = {
    ...event,
    attempt: m.deliveryAttempt,
    leaseDeadlineMs: m.leaseDeadlineMs,
    group: m.group,
    deadLetter: m.deadLetter,
    priority: m.priority,
    orderingKey: m.orderingKey,
    ack: () => ops.ack(delivery.group, delivery.sequence, {
      attempt: delivery.attempt,
      purgatory: delivery.purgatory,
    }),
    nack: (options = {}) =>
      ops.nack(delivery.group, delivery.sequence, {
        ...options,
        attempt: delivery.attempt,
        purgatory: delivery.purgatory,
      }),
    extendLease: (visibilityTimeoutMs = 0) =>
      ops.extendLease(delivery.group, delivery.sequence, delivery.attempt, {
        visibilityTimeoutMs,
        purgatory: delivery.purgatory,
      }),
  };
  return Object.freeze(delivery);
}

export function groupFromWire(m: wire.WireMessage): GroupInfo {
  return Object.freeze({
    name: m.name,
    visibilityTimeoutMs: m.visibilityTimeoutMs,
    maxAttempts: m.maxAttempts,
    ready: m.ready,
    leased: m.leased,
    deadLetters: m.deadLetters,
    members: m.members,
    lastSequence: m.lastSequence,
    ...(m.selection ? { selection: selectionFromWire(m.selection) } : {}),
    retrying: m.retrying,
    backoff: backoffFromWire(m.backoff),
  });
}

type Stream = ClientReadableStream<wire.WireMessage>;

/** A member's deliveries; one consumer at a time. */
export class GroupStream implements AsyncIterable<Delivery> {
  /** Heartbeats received (with `heartbeatIntervalMs`). */
  heartbeats = 0;
  private call: Stream | undefined;
  private closed = false;

  constructor(
    private readonly open: () => Stream,
    private readonly ops: LeaseOps,
    private readonly backoff: Backoff,
    private readonly deadAfterMs: number | undefined,
  ) {}

  /** Open the stream and resolve once the server has let this member join. */
  async join(): Promise<void> {
    const call = this.open();
    this.call = call;
    call.on("error", () => undefined); // errors reach the readers; never unhandled
    await new Promise<void>((resolve, reject) => {
      const onError = (err: unknown): void => reject(fromGrpcError(err));
      call.once("metadata", (_md: Metadata) => {
        call.off("error", onError);
        resolve();
      });
      call.once("error", onError);
    });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Delivery, void, undefined> {
    try {
      for (;;) {
        const call = this.call as Stream;
        const watchdog = new Watchdog(this.deadAfterMs, () => call.cancel());
        let error: unknown;
        try {
          for await (const message of call) {
            if (message.heartbeat) {
              this.heartbeats++;
              watchdog.alive();
              continue;
            }
            watchdog.pause(); // the consumer's time is not the stream's silence
            this.backoff.progress();
            const batch = message.batch as wire.WireMessage[];
            if (batch.length === 0) yield deliveryFromWire(message, this.ops);
            else for (const m of batch) yield deliveryFromWire(m, this.ops);
            watchdog.alive();
          }
          return;
        } catch (err) {
          error = watchdog.fired ? deadStream(this.deadAfterMs as number) : fromGrpcError(err);
        } finally {
          watchdog.stop();
        }
        if (this.closed) return;
        if (!(error instanceof UnavailableError)) throw error;
        await this.rejoin(error);
      }
    } finally {
      this.close();
    }
  }

  /** Re-join after `error` (UNAVAILABLE), with back-off, until joined or out of attempts. */
  private async rejoin(error: unknown): Promise<void> {
    for (let last = error; ; ) {
      await sleep(this.backoff.delay(last));
      try {
        await this.join();
        return;
      } catch (err) {
        if (!(err instanceof UnavailableError)) throw err;
        last = err;
      }
    }
  }

  /** Leave the group (leases held run out and go to other members). */
  close(): void {
    this.closed = true;
    this.call?.cancel();
  }
}

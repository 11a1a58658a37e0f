/**
 * PurgatoryClient: the Node.js client of purgatory.v1.PurgatoryService, method for method
 * the Python client's (camelCase), every method async. The layers: base.ts (channel,
 * plumbing, purgatories and operations), methods.ts (cancel, reschedule, listings,
 * schedules, worker groups' unary calls) and, here, the streams:
 *
 * - `subscribe`: an async iterable that resumes a dropped stream (UNAVAILABLE, a
 *   slow-subscriber cut-off, or a silent stream past `deadAfterMs`) after the last sequence
 *   it yielded, sending the stream's incarnation so the server refuses (StreamResetError)
 *   rather than silently replaying a different history: no event skipped or yielded twice.
 * - `session`: one Session stream (session.ts); `watchMany` registers many operations on
 *   one and yields each outcome as it ends, resuming after a cut (watch.ts); `dispatcher`
 *   is Eureka's batching dispatcher over one (dispatcher.ts).
 * - `joinGroup`: a worker group's member, an async iterable of leased deliveries
 *   (groups.ts).
 *
 * Not shared between processes; one client may serve any number of concurrent calls.
 */
import type { ClientDuplexStream, ClientReadableStream, Metadata } from "@grpc/grpc-js";

import type { CallTarget } from "./base.js";
import type { DispatcherConfig, PermanentErrorHandler } from "./batcher.js";
import { backoffMs, retryPolicy, sleep } from "./connection.js";
import * as wire from "./convert.js";
import { BatchingDispatcher, SessionTransport, type Task } from "./dispatcher.js";
import {
  fromGrpcError,
  INCARNATION,
  invalidArgument,
  PurgatoryError,
  SlowSubscriberError,
  UnavailableError,
} from "./errors.js";
import {
  backoffToWire,
  DEFAULT_PREFETCH,
  GroupStream,
  selectionToWire,
  type JoinOptions,
} from "./groups.js";
import { deadAfter, deadStream, Watchdog } from "./liveness.js";
import { UnaryMethods } from "./methods.js";
import type { Event, OperationSpec, OperationState, RetryPolicy } from "./models.js";
import { Session, type SessionOptions } from "./session.js";
import { Backoff, DEFAULT_FRAME_SIZE, watchMany } from "./watch.js";

export {
  DEFAULT_PURGATORY,
  type CallTarget,
  type ClientOptions,
  type WatchOptions,
} from "./base.js";

/** Subscribe's header metadata: the sequence the stream starts after. */
export const START_AFTER = "purgatory-start-after";

export interface SubscribeOptions extends CallTarget {
  /** Absent: from now on. Present: every retained event after it, then live. */
  afterSequence?: number;
  /** The incarnation `afterSequence` belongs to (when resuming from a stored position). */
  incarnation?: string;
  /** Only these final states. */
  states?: readonly OperationState[];
  /** Only operations watching at least one of these keys. */
  keys?: readonly string[];
  /** Only operation ids starting with this. */
  operationIdPrefix?: string;
  /** Non-zero (at least 100): the server sends a heartbeat when the stream was idle that
   * long; it is yielded as an Event with `heartbeat: true` and `caughtUpSequence`. */
  heartbeatIntervalMs?: number;
  /** Needs heartbeats: a stream silent that long is treated as dead and resumed like a
   * dropped one (UnavailableError once the resume attempts are spent). */
  deadAfterMs?: number;
  /** Overrides the client's `resume` policy for this stream. */
  resume?: RetryPolicy;
}

export interface DispatcherOptions extends CallTarget {
  /** Outcomes of the watches the dispatcher sends (else they are dropped). */
  onOutcome?: (event: Event) => void;
  /** Told of every batch that failed for good, with the error. */
  onPermanentError?: PermanentErrorHandler<Task>;
}

type Stream = ClientReadableStream<wire.WireMessage>;

export class PurgatoryClient extends UnaryMethods {
  /**
   * Outcomes in sequence order, resuming transparently after a dropped stream. Breaking out
   * of the `for await` loop cancels the stream. Rejects with StreamResetError if the
   * purgatory's stream incarnation changed, OutOfRangeError if the events after the
   * position are no longer retained, or the last error once `resume.attempts` resumes in a
   * row brought no event.
   */
  async *subscribe(options: SubscribeOptions = {}): AsyncGenerator<Event, void, undefined> {
    let position = options.afterSequence;
    let incarnation = options.incarnation ?? "";
    const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 0;
    const dead = deadAfter(heartbeatIntervalMs, options.deadAfterMs);
    const resume = options.resume ? retryPolicy(options.resume) : this.resume;
    const filter = {
      states: wire.statesToWire(options.states ?? []),
      keys: [...(options.keys ?? [])],
      operationIdPrefix: options.operationIdPrefix ?? "",
    };
    const purgatory = this.name(options);
    // hops: re-sends at once in this attempt (routing.ts); starts over after a backoff.
    for (let failures = 0, hops = 0; ; ) {
      const req: Record<string, unknown> = { purgatory, filter, incarnation, heartbeatIntervalMs };
      if (position !== undefined) req.afterSequence = position;
      const sentTo = this.router.routes.get(purgatory) ?? "";
      const stub = this.stubFor(purgatory);
      const call = (stub.Subscribe as (r: unknown, m: Metadata) => Stream).call(
        stub,
        req,
        this.metadata(),
      );
      call.on("error", () => undefined); // errors reach the loop below; never unhandled
      call.on("metadata", (md: Metadata) => {
        // Where this stream starts, and which incarnation its sequences belong to: both
        // are what the next resume sends back.
        const start = md.get(START_AFTER)[0];
        if (position === undefined && start !== undefined) position = Number(start);
        const current = String(md.get(INCARNATION)[0] ?? "");
        if (incarnation === "") incarnation = current;
      });
      const watchdog = new Watchdog(dead, () => call.cancel());
      let delay = 0;
      try {
        for await (const msg of call) {
          watchdog.pause(); // the consumer's time is not the stream's silence
          const event = wire.eventFromWire(msg, incarnation);
          position = event.heartbeat ? event.caughtUpSequence : event.sequence;
          failures = 0;
          hops = 0;
          yield event;
          watchdog.alive();
        }
        return;
      } catch (err) {
        if (!watchdog.fired && this.router.reroute(purgatory, err, hops, sentTo)) {
          hops++; // refused, or the routed owner went away: re-open at once
          continue;
        }
        // A changed incarnation comes back as FAILED_PRECONDITION: StreamResetError.
        if (watchdog.fired && sentTo) this.router.drop(purgatory, sentTo); // silent: re-resolve
        hops = 0; // the next attempt, after the backoff, has its own budget
        const error = watchdog.fired ? deadStream(dead as number) : fromGrpcError(err);
        const resumable = error instanceof SlowSubscriberError || error instanceof UnavailableError;
        if (!resumable || position === undefined || failures >= resume.attempts) throw error;
        delay = error instanceof SlowSubscriberError ? 0 : backoffMs(resume, failures);
        failures++;
      } finally {
        watchdog.stop();
        call.cancel();
      }
      await sleep(delay);
    }
  }

  /**
   * Open a Session stream: many watches, signals and force-completes per frame, and each
   * watched operation's outcome as soon as it ends (session.ts). `close()` it when done.
   */
  session(options: SessionOptions = {}): Session {
    const purgatory = this.name(options);
    const session = new Session(
      () => {
        const stub = this.stubFor(purgatory);
        const open = stub.Session as (m: Metadata) => ClientDuplexStream<unknown, wire.WireMessage>;
        return open.call(stub, this.metadata());
      },
      purgatory,
      options,
    );
    // A refusal naming the owner of a replicated purgatory: the next stream goes there.
    session.onEnd(() => {
      if (session.rawError !== undefined) this.router.reroute(purgatory, session.rawError, 0);
    });
    return session;
  }

  /**
   * Register every operation on one Session stream and yield each outcome as it ends.
   * Operations without an id get a client-made one, so a stream dropped by a server
   * restart (UNAVAILABLE) or for reading too slowly (RESOURCE_EXHAUSTED) is re-opened and
   * the watches still open are re-sent by id (nothing registered twice; ended ones answer
   * at once), with the client's `resume` back-off. A frame the server refuses (e.g.
   * INVALID_ARGUMENT) rejects with its error. Breaking out of the loop closes the stream.
   */
  watchMany(
    operations: Iterable<OperationSpec>,
    options: CallTarget & { frameSize?: number } = {},
  ): AsyncGenerator<Event, void, undefined> {
    const purgatory = this.name(options);
    return watchMany(
      (onOutcome) => this.session({ purgatory, onOutcome }),
      operations,
      options.frameSize ?? DEFAULT_FRAME_SIZE,
      this.resume,
    );
  }

  /**
   * Eureka's batching dispatcher over a Session stream of this client, started:
   * `shutdown()` it when done. Outcomes of the watches it sends go to `onOutcome`.
   */
  dispatcher(
    config: Partial<DispatcherConfig> = {},
    options: DispatcherOptions = {},
  ): BatchingDispatcher {
    const purgatory = this.name(options);
    const onOutcome = options.onOutcome ?? ((): void => undefined);
    const transport = new SessionTransport(
      () => this.session({ purgatory, onOutcome }),
      this.deadlineMs ?? 30_000,
    );
    return new BatchingDispatcher(transport, config, {
      onPermanentError: options.onPermanentError,
    });
  }

  /**
   * Join worker group `group` (created on first join with the given settings; 0: the
   * group's, or the defaults) and resolve, once joined, to the stream of deliveries
   * leased to this member (groups.ts). `close()` it (or break out of its loop) to leave.
   */
  async joinGroup(group: string, options: JoinOptions = {}): Promise<GroupStream> {
    if (!group) throw invalidArgument("group", "must not be empty");
    const purgatory = this.name(options);
    const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 0;
    const dead = deadAfter(heartbeatIntervalMs, options.deadAfterMs);
    const req = {
      purgatory,
      group,
      visibilityTimeoutMs: options.visibilityTimeoutMs ?? 0,
      maxAttempts: options.maxAttempts ?? 0,
      prefetch: options.prefetch ?? 0,
      // Deliveries ready together come in one message (older servers: one each).
      maxBatch: options.prefetch || DEFAULT_PREFETCH,
      heartbeatIntervalMs,
      selection: options.selection ? selectionToWire(options.selection) : undefined,
      ...(options.backoff ? { backoff: backoffToWire(options.backoff, invalidArgument) } : {}),
    };
    const open = (): Stream => {
      const stub = this.stubFor(purgatory);
      const subscribe = stub.Subscribe as (r: unknown, m: Metadata) => Stream;
      return subscribe.call(stub, req, this.metadata());
    };
    const stream = new GroupStream(open, this, new Backoff(this.resume), dead);
    try {
      await stream.join();
    } catch (err) {
      stream.close();
      throw err instanceof PurgatoryError ? err : fromGrpcError(err);
    }
    return stream;
  }
}

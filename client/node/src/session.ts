/**
 * Session: one open `Session` stream (purgatory.v1.PurgatoryService.Session), as the
 * Python client's AsyncSession.
 *
 * Frames are written as they are sent (many may be in flight); the reader matches each
 * acknowledgement to its frame by request id and hands outcomes to `onOutcome`, or to a
 * bounded queue read by `outcomes()`. A full queue stops the reader (the stream is no
 * longer read), so a caller that stops consuming outcomes is felt by the server, which
 * ends the stream with RESOURCE_EXHAUSTED past its own bound, instead of growing memory
 * here.
 *
 * A frame the server refuses resolves its acknowledgement with `ack.error` set (the stream
 * goes on). A stream that ends with an error rejects every unanswered acknowledgement and
 * `outcomes()` with it. Heartbeats (`heartbeatIntervalMs`) are counted in `liveness`; with
 * `deadAfterMs` a stream silent that long ends with UnavailableError ("treated as dead").
 */
import { status as Status, type ClientDuplexStream } from "@grpc/grpc-js";

import * as wire from "./convert.js";
import { errorForCode, fromGrpcError, PurgatoryError, UnavailableError } from "./errors.js";
import { deadAfter, deadStream, Watchdog } from "./liveness.js";
import type { Event, OperationSpec, OperationStatus, Signal } from "./models.js";
import { BoundedQueue } from "./queue.js";

/** A signal of a frame: a key alone, or a [key, signal] pair. */
export type SignalEntry = string | readonly [string, Signal | undefined];

/** One frame: any mix of watches, signals (applied in order) and force-completes. */
export interface SessionFrame {
  watches?: readonly OperationSpec[];
  signals?: readonly SignalEntry[];
  forceComplete?: readonly string[];
  /** The purgatory of this frame (default: the session's). */
  purgatory?: string;
}

/** The server's answer to one frame; `error` is null when the frame was applied. */
export interface SessionAck {
  readonly requestId: number;
  readonly error: PurgatoryError | null;
  /** One per watch, in frame order (state at registration; created=false for a re-send). */
  readonly operations: readonly OperationStatus[];
  /** Operations each signal completed, in frame order. */
  readonly completedPerSignal: readonly number[];
  /** Per force-complete id: true only if this frame ended the operation. */
  readonly forceCompleted: readonly boolean[];
}

export interface SessionOptions {
  /** The purgatory of the session's frames (default: the client's). */
  purgatory?: string;
  /** Called with each outcome as it is read (then `outcomes()` yields nothing). */
  onOutcome?: (event: Event) => void;
  /** Outcomes queued for `outcomes()` before the reader stops reading (default 10000). */
  outcomeBuffer?: number;
  /** Non-zero: the server sends a heartbeat whenever the stream was idle that long. */
  heartbeatIntervalMs?: number;
  /** Needs heartbeats: a stream silent that long is treated as dead (UnavailableError). */
  deadAfterMs?: number;
}

/** What the heartbeats said: how many came, and the server's clock in the latest. */
export interface SessionLiveness {
  readonly heartbeatIntervalMs: number;
  readonly deadAfterMs: number | undefined;
  heartbeats: number;
  serverTimeMs: number;
}

export function signalEntryToWire(entry: SignalEntry): Record<string, unknown> {
  return typeof entry === "string"
    ? { key: entry, signal: wire.signalToWire(undefined) }
    : { key: entry[0], signal: wire.signalToWire(entry[1]) };
}

function frameToWire(
  requestId: number,
  purgatory: string,
  frame: SessionFrame,
  watches: readonly unknown[],
): unknown {
  return {
    requestId,
    purgatory,
    watches,
    signals: (frame.signals ?? []).map(signalEntryToWire),
    forceComplete: [...(frame.forceComplete ?? [])],
  };
}

/** A frame's acknowledgement; `payloads`: those of the frame's watches, in order (the
 * server's statuses carry none: the client sent them). */
function ackFromWire(m: wire.WireMessage, payloads: readonly Buffer[]): SessionAck {
  return Object.freeze({
    requestId: m.requestId,
    error: m.code ? errorForCode(m.code, m.message) : null,
    operations: Object.freeze(
      m.operations.map((s: wire.WireMessage, i: number) => wire.statusFromWire(s, payloads[i])),
    ),
    completedPerSignal: Object.freeze([...m.completedPerSignal]),
    forceCompleted: Object.freeze([...m.forceCompleted]),
  });
}

type Duplex = ClientDuplexStream<unknown, wire.WireMessage>;

export class Session {
  readonly purgatory: string;
  readonly liveness: SessionLiveness;
  /** How the stream ended (undefined while open, or if it ended cleanly). */
  error: PurgatoryError | undefined;
  /** The grpc-js error the stream ended with (routing reads its trailers). */
  rawError: unknown;
  private finishedFlag = false;
  private writingDone = false;
  private cancelled = false;
  private nextId = 1;
  // Each unanswered frame's promise, with its watches' payloads (for the answer).
  private readonly acks = new Map<
    number,
    {
      resolve: (ack: SessionAck) => void;
      reject: (err: unknown) => void;
      payloads: readonly Buffer[];
    }
  >();
  private readonly queue: BoundedQueue<Event>;
  private readonly onOutcome: ((event: Event) => void) | undefined;
  private readonly endCallbacks: Array<() => void> = [];
  private readonly call: Duplex;
  private readonly watchdog: Watchdog;
  /** Settles once the reader is done (the stream has ended). */
  readonly ended: Promise<void>;

  constructor(open: () => Duplex, purgatory: string, options: SessionOptions = {}) {
    const interval = options.heartbeatIntervalMs ?? 0;
    this.liveness = {
      heartbeatIntervalMs: interval,
      deadAfterMs: deadAfter(interval, options.deadAfterMs),
      heartbeats: 0,
      serverTimeMs: 0,
    };
    this.purgatory = purgatory;
    this.onOutcome = options.onOutcome;
    this.queue = new BoundedQueue(options.outcomeBuffer ?? 10_000);
    this.call = open();
    this.watchdog = new Watchdog(this.liveness.deadAfterMs, () => this.call.cancel());
    if (interval) {
      // The liveness-only frame goes first (request id 0; its acknowledgement is ignored
      // unless it refuses the interval, which ends the session with that error).
      this.call.write({ requestId: 0, heartbeatIntervalMs: interval });
    }
    this.ended = this.read();
  }

  /** True once the stream has ended (`error` says how). */
  get finished(): boolean {
    return this.finishedFlag;
  }

  /** Call `callback()` once the stream has ended (at once if it has). */
  onEnd(callback: () => void): void {
    if (this.finishedFlag) callback();
    else this.endCallbacks.push(callback);
  }

  /** Write one frame; resolves with its acknowledgement (rejects if the stream ends first). */
  send(frame: SessionFrame = {}): Promise<SessionAck> {
    if (this.finishedFlag) return Promise.reject(this.endedError());
    if (this.writingDone) return Promise.reject(new Error("session: send after doneWriting()"));
    const requestId = this.nextId++;
    const watches = (frame.watches ?? []).map(wire.specToWire);
    const message = frameToWire(requestId, frame.purgatory ?? this.purgatory, frame, watches);
    const payloads = watches.map((w) => w.payload as Buffer);
    return new Promise((resolve, reject) => {
      this.acks.set(requestId, { resolve, reject, payloads });
      this.call.write(message);
    });
  }

  /** No more frames: the server ends the stream once every outcome is sent. */
  doneWriting(): void {
    if (!this.finishedFlag && !this.writingDone) this.call.end();
    this.writingDone = true;
  }

  /** Outcomes as they end, until the stream ends (then throws its error, if any). */
  async *outcomes(): AsyncGenerator<Event, void, undefined> {
    for (;;) {
      const event = await this.queue.take();
      if (event === undefined) {
        if (this.error !== undefined) throw this.error;
        return;
      }
      yield event;
    }
  }

  /** Cancel the stream (unanswered acknowledgements reject) and wait for the reader. */
  async close(): Promise<void> {
    this.cancelled = true;
    this.call.cancel();
    this.queue.close(); // a reader waiting for room in the queue goes on, and ends
    await this.ended;
  }

  // ------------------------------------------------------------------ reader
  private endedError(): PurgatoryError {
    return this.error ?? new UnavailableError(Status.UNAVAILABLE, "session stream ended");
  }

  private async read(): Promise<void> {
    let error: PurgatoryError | undefined;
    try {
      for await (const message of this.call) {
        this.watchdog.pause();
        error = await this.take(message);
        if (error !== undefined) {
          this.call.cancel();
          break;
        }
        this.watchdog.alive();
      }
    } catch (err) {
      if (this.watchdog.fired) {
        error = deadStream(this.watchdog.deadAfterMs as number);
      } else if (!(this.cancelled && (err as { code?: number }).code === Status.CANCELLED)) {
        this.rawError = err;
        error = fromGrpcError(err) as PurgatoryError;
      }
    } finally {
      this.watchdog.stop();
      this.finish(error);
    }
  }

  /** One message; returns the error that ends the stream, if any (the liveness frame
   * refused). */
  private async take(message: wire.WireMessage): Promise<PurgatoryError | undefined> {
    if (message.heartbeat) {
      this.liveness.heartbeats++;
      this.liveness.serverTimeMs = message.serverTimeMs;
      return undefined;
    }
    const ack = message.ack;
    if (ack) {
      if (ack.requestId === 0 && ack.code) return errorForCode(ack.code, ack.message);
      const waiter = this.acks.get(ack.requestId);
      if (waiter !== undefined) {
        this.acks.delete(ack.requestId);
        waiter.resolve(ackFromWire(ack, waiter.payloads));
      }
    }
    for (const raw of message.outcomes) {
      const event = wire.eventFromWire(raw, "");
      if (this.onOutcome !== undefined) this.onOutcome(event);
      else await this.queue.put(event);
    }
    return undefined;
  }

  private finish(error: PurgatoryError | undefined): void {
    this.error = error;
    this.finishedFlag = true;
    const failure = this.endedError();
    for (const waiter of this.acks.values()) waiter.reject(failure);
    this.acks.clear();
    this.queue.close();
    for (const callback of this.endCallbacks.splice(0)) callback();
  }
}

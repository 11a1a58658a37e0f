/**
 * BatchingDispatcher: Eureka's task batcher (batcher.ts) over a Session stream, as the
 * Python client's AsyncBatchingDispatcher.
 *
 * Producers call `signal`, `watch` or `forceComplete`; each returns the task's own promise.
 * An acceptor loop hands batches (up to `maxBatchSize` tasks, after at most
 * `maxBatchingDelayMs`) to up to `maxInFlight` concurrent sends, each one Session frame:
 * its watches, signals and force-completes. The frame's acknowledgement gives each task its
 * value: a watch its OperationStatus at registration, a signal the number of operations
 * it completed, a force-complete whether it ended the operation. Tasks with the same id
 * coalesce (the newest is sent once; every promise resolves with its result).
 *
 * Task promises are marked handled: a task dropped (overflow, expiry, shutdown) that no
 * one awaits does not crash the process with an unhandled rejection; awaiting it still
 * rejects with its error. Tests use `start: false`, an injected clock and `runOnce()`.
 */
import { status as Status } from "@grpc/grpc-js";

import {
  AcceptorCore,
  classify,
  dispatcherConfig,
  ProcessingResult,
  type BatchOutcome,
  type DispatcherConfig,
  type DispatcherCounters,
  type PermanentErrorHandler,
  type TaskHolder,
} from "./batcher.js";
import {
  DeadlineExceededError,
  PurgatoryError,
  ServerError,
  UnavailableError,
} from "./errors.js";
import type { OperationSpec, OperationStatus, Signal } from "./models.js";
import type { Session, SessionAck, SignalEntry } from "./session.js";

/** What the dispatcher sends: a tagged task. */
export type Task =
  | { readonly kind: "signal"; readonly key: string; readonly signal?: Signal }
  | { readonly kind: "watch"; readonly spec: OperationSpec }
  | { readonly kind: "forceComplete"; readonly operationId: string };

/** Sends one batch and says what came of it. */
export interface BatchTransport {
  process(tasks: readonly Task[]): Promise<BatchOutcome>;
  close(): Promise<void>;
}

/** A batch as one Session frame, and where each task's value sits in the ack. */
export function splitBatch(tasks: readonly Task[]): {
  watches: OperationSpec[];
  signals: SignalEntry[];
  forceComplete: string[];
  places: Array<readonly [0 | 1 | 2, number]>;
} {
  const parts = {
    watches: [] as OperationSpec[],
    signals: [] as SignalEntry[],
    forceComplete: [] as string[],
    places: [] as Array<readonly [0 | 1 | 2, number]>,
  };
  for (const task of tasks) {
    if (task.kind === "signal") {
      parts.places.push([1, parts.signals.length]);
      parts.signals.push([task.key, task.signal]);
    } else if (task.kind === "watch") {
      parts.places.push([0, parts.watches.length]);
      parts.watches.push(task.spec);
    } else {
      parts.places.push([2, parts.forceComplete.length]);
      parts.forceComplete.push(task.operationId);
    }
  }
  return parts;
}

function outcomeOfError(error: PurgatoryError): BatchOutcome {
  return { result: classify(error.code), error };
}

/** Batches as frames of one shared Session stream, re-opened after it breaks. */
export class SessionTransport implements BatchTransport {
  private session: Session | undefined;

  constructor(
    private readonly openSession: () => Session,
    private readonly ackTimeoutMs = 30_000,
  ) {}

  async process(tasks: readonly Task[]): Promise<BatchOutcome> {
    const parts = splitBatch(tasks);
    if (this.session === undefined || this.session.finished) this.session = this.openSession();
    const session = this.session;
    let timer: NodeJS.Timeout | undefined;
    let ack: SessionAck;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new DeadlineExceededError(Status.DEADLINE_EXCEEDED, "no acknowledgement")),
          this.ackTimeoutMs,
        );
      });
      ack = await Promise.race([session.send(parts), timeout]);
    } catch (err) {
      if (this.session === session) this.session = undefined;
      await session.close();
      if (err instanceof PurgatoryError) return outcomeOfError(err);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    if (ack.error !== null) return outcomeOfError(ack.error);
    const lists: ReadonlyArray<readonly unknown[]> = [
      ack.operations,
      ack.completedPerSignal,
      ack.forceCompleted,
    ];
    return {
      result: ProcessingResult.SUCCESS,
      values: parts.places.map(([kind, i]) => lists[kind][i]),
    };
  }

  async close(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.close();
  }
}

export interface DispatcherOptions {
  clock?: () => number;
  onPermanentError?: PermanentErrorHandler<Task>;
  /** false: no acceptor loop; drive it with runOnce() (tests). */
  start?: boolean;
}

export interface TaskOptions {
  /** Tasks with the same id coalesce: the newest is sent once, every promise gets it. */
  taskId?: string;
  /** Dropped unsent (TaskExpiredError) if not sent within this many ms. */
  ttlMs?: number;
}

const noop = (): void => undefined;

export class BatchingDispatcher {
  readonly config: DispatcherConfig;
  private readonly core: AcceptorCore<Task>;
  private inFlight = 0;
  private stopped = false;
  private serial = 0;
  private wakeUp: (() => void) | undefined;
  private idleWaiters: Array<() => void> = [];
  private readonly workers = new Set<Promise<void>>();
  private readonly acceptor: Promise<void> | undefined;

  constructor(
    private readonly transport: BatchTransport,
    config: Partial<DispatcherConfig> = {},
    options: DispatcherOptions = {},
  ) {
    this.config = dispatcherConfig(config);
    this.core = new AcceptorCore(
      this.config,
      options.clock ?? (() => performance.now()),
      options.onPermanentError,
    );
    this.acceptor = options.start === false ? undefined : this.run();
  }

  /** A snapshot of Eureka's counters (tasks, not batches; `batches` counts batches). */
  get counters(): DispatcherCounters {
    return { ...this.core.counters };
  }

  // ------------------------------------------------------------------ producers
  process<R>(taskId: string, task: Task, expiryTime = Infinity): Promise<R> {
    if (this.stopped) return Promise.reject(new Error("dispatcher is shut down"));
    let settler!: { resolve: (v: unknown) => void; reject: (e: unknown) => void };
    const promise = new Promise<R>((resolve, reject) => {
      settler = { resolve: resolve as (v: unknown) => void, reject };
    });
    promise.catch(noop);
    this.core.process(taskId, task, expiryTime, settler);
    this.wake();
    return promise;
  }

  private expiry(ttlMs: number | undefined): number {
    return ttlMs === undefined ? Infinity : this.core.clock() + ttlMs;
  }

  /** Resolves to the number of operations the signal completed. */
  signal(key: string, signal?: Signal, options: TaskOptions = {}): Promise<number> {
    const id = options.taskId ?? `\0signal:${this.serial++}`;
    return this.process(id, { kind: "signal", key, signal }, this.expiry(options.ttlMs));
  }

  /** Resolves to the operation's status at registration (an id is best: re-sends coalesce). */
  watch(spec: OperationSpec, options: TaskOptions = {}): Promise<OperationStatus> {
    const id = options.taskId ?? (spec.operationId || `\0watch:${this.serial++}`);
    return this.process(id, { kind: "watch", spec }, this.expiry(options.ttlMs));
  }

  /** Resolves to true only if this task ended the operation. */
  forceComplete(operationId: string, options: { ttlMs?: number } = {}): Promise<boolean> {
    const task: Task = { kind: "forceComplete", operationId };
    return this.process(`\0force:${operationId}`, task, this.expiry(options.ttlMs));
  }

  // ------------------------------------------------------------------ driving
  /** Send one batch now if one is due (deterministic tests); true if one was sent. */
  async runOnce(): Promise<boolean> {
    const batch = this.core.assignBatchWork();
    if (batch === undefined) return false;
    await this.send(batch);
    return true;
  }

  private async send(batch: TaskHolder<Task>[]): Promise<void> {
    let outcome: BatchOutcome;
    try {
      outcome = await this.transport.process(batch.map((h) => h.task));
    } catch (err) {
      // A transport bug must fail its batch, not hang it.
      const error = new ServerError(Status.INTERNAL, `transport failed: ${String(err)}`);
      outcome = { result: ProcessingResult.PERMANENT_ERROR, error };
    }
    this.core.complete(batch, outcome);
  }

  private wake(): void {
    const wake = this.wakeUp;
    this.wakeUp = undefined;
    wake?.();
  }

  private async run(): Promise<void> {
    const core = this.core;
    while (!this.stopped) {
      let wait: number | undefined;
      if (this.inFlight < this.config.maxInFlight) {
        const batch = core.assignBatchWork();
        if (batch !== undefined) {
          this.inFlight++;
          const worker = this.send(batch).finally(() => {
            this.inFlight--;
            this.workers.delete(worker);
            this.wake();
          });
          this.workers.add(worker);
          continue;
        }
        wait = core.waitTime();
      }
      if (wait === undefined && this.inFlight === 0) {
        for (const idle of this.idleWaiters.splice(0)) idle();
      }
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wakeUp = resolve;
        if (wait !== undefined) timer = setTimeout(resolve, Math.max(wait, 0.5));
      });
      clearTimeout(timer);
      this.wakeUp = undefined;
    }
  }

  /** Wait until every accepted task has been sent and answered; false on timeout. */
  async flush(timeoutMs?: number): Promise<boolean> {
    const end = timeoutMs === undefined ? Infinity : performance.now() + timeoutMs;
    while (this.inFlight > 0 || this.core.pendingCount() > 0) {
      const left = end - performance.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.idleWaiters.push(resolve);
        if (left !== Infinity) timer = setTimeout(resolve, left);
        this.wake();
      });
      clearTimeout(timer);
    }
    return true;
  }

  /** Flush (up to `flushTimeoutMs`), fail what is left unsent, close the transport. */
  async shutdown(options: { flushTimeoutMs?: number } = {}): Promise<void> {
    if (this.acceptor !== undefined && !this.stopped) {
      await this.flush(options.flushTimeoutMs ?? 10_000);
    }
    this.stopped = true;
    this.core.dropAll(new UnavailableError(Status.UNAVAILABLE, "dispatcher shut down"));
    this.wake();
    await Promise.allSettled([...this.workers, this.acceptor]);
    await this.transport.close();
  }
}

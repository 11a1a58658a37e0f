/**
 * Eureka's task batcher (com.netflix.eureka.util.batcher), without I/O or timers: the
 * same state machine as the Python client's purgatory_client/_batcher.py, which the
 * dispatcher (dispatcher.ts) drives and tests drive by hand with an injected clock.
 *
 * - `process(id, task, expiry)` appends a TaskHolder to the acceptor queue;
 * - failed batches go back to the reprocess queue (`reprocess`);
 * - `drainInputQueues` moves both into the pending map (id -> holder) and the processing
 *   order. Retried tasks go to the front, newest first, and are dropped (counted
 *   overridden) if a newer task with the same id is already pending; an accepted task with
 *   the id of a pending one replaces it in place and is sent once (overridden; the older
 *   task's promise resolves with the newer one's result). When the pending map holds
 *   `maxBufferSize` tasks the oldest is dropped to make room (overflowed, TaskOverflowError)
 *   and retries that no longer fit are dropped;
 * - `assignBatchWork` takes up to `maxBatchSize` tasks once the oldest has waited
 *   `maxBatchingDelayMs`, the buffer is full, or a full batch is ready. Expired tasks are
 *   dropped there (expired, TaskExpiredError), never sent;
 * - the TrafficShaper delays the next batch after a congestion or a network failure by
 *   the matching retry delay (capped at MAX_DELAY_MS), as Eureka does.
 *
 * Outcomes map from status codes (`classify`): OK -> SUCCESS, RESOURCE_EXHAUSTED ->
 * CONGESTION, UNAVAILABLE and DEADLINE_EXCEEDED -> TRANSIENT_ERROR (both retried),
 * anything else -> PERMANENT_ERROR (dropped: the tasks' promises reject and
 * `onPermanentError` is told).
 */
import { status as Status } from "@grpc/grpc-js";

import { PurgatoryError, ServerError } from "./errors.js";

/** Eureka's TrafficShaper caps both retry delays at 30 s. */
export const MAX_DELAY_MS = 30_000;

export const ProcessingResult = {
  SUCCESS: "success",
  CONGESTION: "congestion",
  TRANSIENT_ERROR: "transient_error",
  PERMANENT_ERROR: "permanent_error",
} as const;
export type ProcessingResult = (typeof ProcessingResult)[keyof typeof ProcessingResult];

/** Eureka's outcome for a batch that ended with gRPC status `code`. */
export function classify(code: number): ProcessingResult {
  if (code === Status.OK) return ProcessingResult.SUCCESS;
  if (code === Status.RESOURCE_EXHAUSTED) return ProcessingResult.CONGESTION;
  if (code === Status.UNAVAILABLE || code === Status.DEADLINE_EXCEEDED) {
    return ProcessingResult.TRANSIENT_ERROR;
  }
  return ProcessingResult.PERMANENT_ERROR;
}

/** The task's expiry passed before it could be sent; it was never sent. */
export class TaskExpiredError extends PurgatoryError {
  constructor(readonly taskId: string) {
    super(Status.DEADLINE_EXCEEDED, `task ${JSON.stringify(taskId)} expired unsent`);
  }
}

/** The dispatcher's buffer was full; the task was dropped unsent (oldest first). */
export class TaskOverflowError extends PurgatoryError {
  constructor(
    readonly taskId: string,
    maxBufferSize: number,
  ) {
    super(
      Status.RESOURCE_EXHAUSTED,
      `task ${JSON.stringify(taskId)} dropped: more than maxBufferSize=${maxBufferSize} pending`,
    );
  }
}

/** Eureka's createBatchingTaskDispatcher arguments (times in ms). */
export interface DispatcherConfig {
  maxBufferSize: number;
  maxBatchSize: number;
  maxBatchingDelayMs: number;
  congestionRetryDelayMs: number;
  networkFailureRetryMs: number;
  /** Eureka's workerCount: batches in flight at once. */
  maxInFlight: number;
}

export const DEFAULT_DISPATCHER_CONFIG: Readonly<DispatcherConfig> = Object.freeze({
  maxBufferSize: 100_000,
  maxBatchSize: 500,
  maxBatchingDelayMs: 5,
  congestionRetryDelayMs: 1_000,
  networkFailureRetryMs: 100,
  maxInFlight: 4,
});

export function dispatcherConfig(given: Partial<DispatcherConfig> = {}): DispatcherConfig {
  const config = { ...DEFAULT_DISPATCHER_CONFIG, ...given };
  for (const name of ["maxBufferSize", "maxBatchSize", "maxInFlight"] as const) {
    if (!(config[name] >= 1)) throw new RangeError(`${name} must be at least 1`);
  }
  return config;
}

/** Eureka's acceptor and executor counters (tasks, not batches). */
export interface DispatcherCounters {
  accepted: number;
  overridden: number;
  expired: number;
  overflowed: number;
  retried: number;
  succeeded: number;
  failed: number;
  batches: number;
}

/** Where a task's result goes: its promise's settle functions. */
export interface TaskSettler {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export class TaskHolder<T = unknown> {
  /** Settlers of tasks this one overrode: they settle with it. */
  readonly followers: TaskSettler[] = [];

  constructor(
    readonly taskId: string,
    readonly task: T,
    /** Clock ms; Infinity for never. */
    readonly expiryTime: number,
    readonly submitTimestamp: number,
    readonly settler: TaskSettler,
  ) {}

  succeed(value: unknown): void {
    this.settler.resolve(value);
    for (const f of this.followers) f.resolve(value);
  }

  fail(error: unknown): void {
    this.settler.reject(error);
    for (const f of this.followers) f.reject(error);
  }
}

/** What a transport made of one batch: one value per task on SUCCESS, else the error. */
export interface BatchOutcome {
  readonly result: ProcessingResult;
  readonly values?: readonly unknown[];
  readonly error?: PurgatoryError;
}

/** Delays the next batch after congestion or a network failure (Eureka's rules). */
export class TrafficShaper {
  readonly congestionRetryDelayMs: number;
  readonly networkFailureRetryMs: number;
  private lastCongestion: number | undefined;
  private lastNetworkFailure: number | undefined;

  constructor(congestionRetryDelayMs: number, networkFailureRetryMs: number) {
    this.congestionRetryDelayMs = Math.min(MAX_DELAY_MS, congestionRetryDelayMs);
    this.networkFailureRetryMs = Math.min(MAX_DELAY_MS, networkFailureRetryMs);
  }

  registerFailure(result: ProcessingResult, now: number): void {
    if (result === ProcessingResult.CONGESTION) this.lastCongestion = now;
    else if (result === ProcessingResult.TRANSIENT_ERROR) this.lastNetworkFailure = now;
  }

  /** Ms the next batch must still wait (0: send now). */
  transmissionDelay(now: number): number {
    if (this.lastCongestion !== undefined) {
      const elapsed = now - this.lastCongestion;
      if (elapsed >= 0 && elapsed < this.congestionRetryDelayMs) {
        return this.congestionRetryDelayMs - elapsed;
      }
      this.lastCongestion = undefined;
    }
    if (this.lastNetworkFailure !== undefined) {
      const elapsed = now - this.lastNetworkFailure;
      if (elapsed >= 0 && elapsed < this.networkFailureRetryMs) {
        return this.networkFailureRetryMs - elapsed;
      }
      this.lastNetworkFailure = undefined;
    }
    return 0;
  }
}

export type PermanentErrorHandler<T> = (
  batch: readonly TaskHolder<T>[],
  error: PurgatoryError,
) => void;

/** Eureka's AcceptorExecutor state (see the module comment). Single-threaded by nature. */
export class AcceptorCore<T = unknown> {
  readonly counters: DispatcherCounters = {
    accepted: 0,
    overridden: 0,
    expired: 0,
    overflowed: 0,
    retried: 0,
    succeeded: 0,
    failed: 0,
    batches: 0,
  };
  readonly trafficShaper: TrafficShaper;
  acceptorQueue: TaskHolder<T>[] = [];
  reprocessQueue: TaskHolder<T>[] = [];
  /** id -> holder; a Map keeps insertion order, but the order of sending is `order`. */
  readonly pending = new Map<string, TaskHolder<T>>();
  order: string[] = [];
  private scheduleTime = 0;

  constructor(
    readonly config: DispatcherConfig,
    readonly clock: () => number,
    private readonly onPermanentError?: PermanentErrorHandler<T>,
  ) {
    this.trafficShaper = new TrafficShaper(
      config.congestionRetryDelayMs,
      config.networkFailureRetryMs,
    );
  }

  // ------------------------------------------------------------------ input
  process(taskId: string, task: T, expiryTime: number, settler: TaskSettler): void {
    this.acceptorQueue.push(new TaskHolder(taskId, task, expiryTime, this.clock(), settler));
    this.counters.accepted++;
  }

  /** A batch failed with CONGESTION or TRANSIENT_ERROR: retry its tasks first. */
  reprocess(holders: readonly TaskHolder<T>[], result: ProcessingResult): void {
    this.reprocessQueue.push(...holders);
    this.counters.retried += holders.length;
    this.trafficShaper.registerFailure(result, this.clock());
  }

  private isFull(): boolean {
    return this.pending.size >= this.config.maxBufferSize;
  }

  drainInputQueues(): void {
    this.drainReprocessQueue();
    const accepted = this.acceptorQueue;
    this.acceptorQueue = [];
    for (const holder of accepted) this.appendTaskHolder(holder);
  }

  private drainReprocessQueue(): void {
    const now = this.clock();
    const queue = this.reprocessQueue;
    const front: string[] = [];
    while (queue.length > 0 && !this.isFull()) {
      const holder = queue.pop() as TaskHolder<T>; // newest first, each to the front
      const newer = this.pending.get(holder.taskId);
      if (holder.expiryTime <= now) {
        this.counters.expired++;
        holder.fail(new TaskExpiredError(holder.taskId));
      } else if (newer !== undefined) {
        this.counters.overridden++;
        newer.followers.push(holder.settler, ...holder.followers);
      } else {
        this.pending.set(holder.taskId, holder);
        front.push(holder.taskId);
      }
    }
    if (front.length > 0) this.order = [...front.reverse(), ...this.order];
    if (queue.length > 0) {
      // Full: the older retries are dropped.
      this.counters.overflowed += queue.length;
      for (const holder of queue) {
        holder.fail(new TaskOverflowError(holder.taskId, this.config.maxBufferSize));
      }
      this.reprocessQueue = [];
    }
  }

  private appendTaskHolder(holder: TaskHolder<T>): void {
    const previous = this.pending.get(holder.taskId);
    if (previous !== undefined) {
      this.counters.overridden++;
      holder.followers.push(previous.settler, ...previous.followers);
      this.pending.set(holder.taskId, holder); // keeps its place in the order
      return;
    }
    if (this.isFull()) {
      const oldest = this.order.shift() as string;
      const dropped = this.pending.get(oldest) as TaskHolder<T>;
      this.pending.delete(oldest);
      this.counters.overflowed++;
      dropped.fail(new TaskOverflowError(dropped.taskId, this.config.maxBufferSize));
    }
    this.pending.set(holder.taskId, holder);
    this.order.push(holder.taskId);
  }

  // ------------------------------------------------------------------ scheduling
  private hasEnoughTasksForNextBatch(now: number): boolean {
    if (this.order.length === 0) return false;
    if (this.isFull() || this.order.length >= this.config.maxBatchSize) return true;
    const head = this.pending.get(this.order[0]) as TaskHolder<T>;
    return now - head.submitTimestamp >= this.config.maxBatchingDelayMs;
  }

  /** The next batch to send now, or undefined (drains the inputs first). */
  assignBatchWork(): TaskHolder<T>[] | undefined {
    this.drainInputQueues();
    const now = this.clock();
    if (this.scheduleTime < now) {
      this.scheduleTime = now + this.trafficShaper.transmissionDelay(now);
    }
    if (this.scheduleTime > now || !this.hasEnoughTasksForNextBatch(now)) return undefined;
    const take = Math.min(this.config.maxBatchSize, this.order.length);
    const ids = this.order.splice(0, take);
    const batch: TaskHolder<T>[] = [];
    for (const id of ids) {
      const holder = this.pending.get(id) as TaskHolder<T>;
      this.pending.delete(id);
      if (holder.expiryTime > now) {
        batch.push(holder);
      } else {
        this.counters.expired++;
        holder.fail(new TaskExpiredError(holder.taskId));
      }
    }
    if (batch.length === 0) return undefined;
    this.counters.batches++;
    return batch;
  }

  /** Ms until `assignBatchWork` may have work; undefined: nothing queued. */
  waitTime(): number | undefined {
    if (this.acceptorQueue.length > 0 || this.reprocessQueue.length > 0) return 0;
    if (this.order.length === 0) return undefined;
    const now = this.clock();
    const shaped = Math.max(0, this.scheduleTime - now);
    if (this.isFull() || this.order.length >= this.config.maxBatchSize) return shaped;
    const head = this.pending.get(this.order[0]) as TaskHolder<T>;
    const waited = now - head.submitTimestamp;
    return Math.max(shaped, this.config.maxBatchingDelayMs - waited);
  }

  // ------------------------------------------------------------------ results
  /** Apply a transport's verdict on `batch` (Eureka's worker switch). */
  complete(batch: readonly TaskHolder<T>[], outcome: BatchOutcome): void {
    const result = outcome.result;
    if (result === ProcessingResult.SUCCESS) {
      this.counters.succeeded += batch.length;
      const values = outcome.values ?? [];
      batch.forEach((holder, i) => holder.succeed(values[i]));
    } else if (result === ProcessingResult.PERMANENT_ERROR) {
      this.counters.failed += batch.length;
      const error = outcome.error ?? new ServerError(Status.UNKNOWN, "batch failed");
      this.onPermanentError?.(batch, error);
      for (const holder of batch) holder.fail(error);
    } else {
      this.reprocess(batch, result);
    }
  }

  /** Tasks accepted and not yet handed to a batch. */
  pendingCount(): number {
    return this.acceptorQueue.length + this.reprocessQueue.length + this.pending.size;
  }

  /** Fail every task not yet sent (shutdown); returns how many. */
  dropAll(error: unknown): number {
    const holders = [...this.acceptorQueue, ...this.reprocessQueue, ...this.pending.values()];
    this.acceptorQueue = [];
    this.reprocessQueue = [];
    this.pending.clear();
    this.order = [];
    for (const holder of holders) holder.fail(error);
    return holders.length;
  }
}

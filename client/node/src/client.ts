/**
 * PurgatoryClient: the Node.js client of purgatory.v1.PurgatoryService, method for method
 * the Python client's (camelCase), every method async.
 *
 * What it does for you that a hand-written stub call gets wrong:
 * - `wait` (the long-poll) gives the operation an id when you give none and, if the call
 *   fails with UNAVAILABLE (server restarting, connection lost), re-sends the SAME request
 *   with backoff: the server answers a re-send of an id it knows with that operation's
 *   (possibly already final) state instead of registering it twice.
 * - `subscribe` is an async iterator that resumes a dropped stream (UNAVAILABLE, or a
 *   slow-subscriber cut-off) after the last sequence it yielded, sending the stream's
 *   incarnation so the server refuses (StreamResetError) rather than silently replaying a
 *   different history after an in-memory purgatory was re-created: no event is skipped or
 *   yielded twice.
 * - every failure is a PurgatoryError subclass (errors.ts), never a raw grpc-js error.
 *
 * Not shared between processes; one client may serve any number of concurrent calls.
 */
import { randomUUID } from "node:crypto";
import {
  Metadata,
  type CallOptions,
  type ChannelOptions,
  type ChannelCredentials,
  type Client,
  type ClientReadableStream,
} from "@grpc/grpc-js";

import {
  authMetadata,
  backoffMs,
  channelCredentials,
  resolveTls,
  retryPolicy,
  sleep,
  type TlsOptions,
} from "./connection.js";
import * as wire from "./convert.js";
import { fromGrpcError, INCARNATION, SlowSubscriberError, UnavailableError } from "./errors.js";
import { purgatoryOf, Router } from "./routing.js";
import type {
  BatchSignalResult,
  Condition,
  Event,
  ForceCompleteResult,
  OperationSpec,
  OperationState,
  OperationStatus,
  PurgatoryConfig,
  PurgatoryInfo,
  RetryPolicy,
  Signal,
} from "./models.js";

export const DEFAULT_PURGATORY = "default";
/** Subscribe's header metadata: the sequence the stream starts after. */
export const START_AFTER = "purgatory-start-after";

export interface ClientOptions {
  /** The purgatory methods use when they are not given one (default "default"). */
  purgatory?: string;
  /** Deadline of each non-waiting call in ms (default 30000; null: none). */
  deadlineMs?: number | null;
  /** Bearer token (default: PURGATORY_TOKEN). */
  token?: string;
  /** TLS: true for the system roots, or options (default: on if PURGATORY_TLS_CA is set). */
  tls?: boolean | TlsOptions;
  /** Channel credentials built by you; overrides `tls`. */
  credentials?: ChannelCredentials;
  /** How `subscribe` resumes a dropped stream. */
  resume?: RetryPolicy;
  /** How `wait` re-sends a long-poll refused with UNAVAILABLE. */
  retry?: RetryPolicy;
  /** grpc-js channel options ("grpc.keepalive_time_ms", ...). */
  channelOptions?: ChannelOptions;
}

export interface CallTarget {
  /** The purgatory (default: the client's). */
  purgatory?: string;
}

export interface WatchOptions extends CallTarget {
  condition?: Condition;
  payload?: Uint8Array | string;
  /** Unique per purgatory; `wait` makes one up when empty, `tryCompleteElseWatch` lets the server. */
  operationId?: string;
  /** Long-poll: answer only once the operation has ended. */
  wait?: boolean;
  /** This call's deadline in ms (a waiting call has none unless given). */
  deadlineMs?: number;
  /** Aborting it cancels the call (CancelledError); the operation stays registered. */
  signal?: AbortSignal;
}

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
}

type Unary = (
  request: unknown,
  metadata: Metadata,
  options: CallOptions,
  callback: (err: unknown, response: wire.WireMessage) => void,
) => { cancel(): void };

export class PurgatoryClient {
  readonly purgatory: string;
  readonly deadlineMs: number | null;
  private readonly stub: Client & Record<string, unknown>;
  private readonly auth: Metadata | undefined;
  private readonly resume: Required<RetryPolicy>;
  private readonly retry: Required<RetryPolicy>;
  /** Replicated purgatories: routes to owners (routing.ts). */
  private readonly router: Router<Client & Record<string, unknown>>;

  constructor(target = "127.0.0.1:50051", options: ClientOptions = {}) {
    this.purgatory = options.purgatory ?? DEFAULT_PURGATORY;
    this.deadlineMs = options.deadlineMs === undefined ? 30_000 : options.deadlineMs;
    this.auth = authMetadata(options.token);
    this.resume = retryPolicy(options.resume);
    this.retry = retryPolicy(options.retry);
    const tls = options.credentials ? undefined : resolveTls(options.tls);
    const channelOptions: ChannelOptions = { ...(options.channelOptions ?? {}) };
    if (tls?.serverName) channelOptions["grpc.ssl_target_name_override"] = tls.serverName;
    const Ctor = wire.serviceClient();
    const creds = options.credentials ?? channelCredentials(tls);
    this.stub = new Ctor(target, creds, channelOptions) as Client & Record<string, unknown>;
    this.router = new Router(
      (address) => new Ctor(address, creds, channelOptions) as Client & Record<string, unknown>,
    );
  }

  /** Close the channel: new calls fail; calls in flight go on (abort them with `signal`). */
  close(): void {
    this.stub.close();
    this.router.close();
  }

  // ------------------------------------------------------------ plumbing
  private metadata(): Metadata {
    return this.auth ? this.auth.clone() : new Metadata();
  }

  private name(target: CallTarget | undefined): string {
    return target?.purgatory ?? this.purgatory;
  }

  private call(
    method: string,
    request: unknown,
    deadlineMs: number | null,
    signal?: AbortSignal,
    hop = 0,
  ): Promise<wire.WireMessage> {
    const purgatory = purgatoryOf(method, request);
    const sentTo = this.router.routes.get(purgatory) ?? "";
    const stub = this.router.stubFor(purgatory) ?? this.stub;
    const fn = stub[method] as Unary;
    const options: CallOptions = deadlineMs === null ? {} : { deadline: Date.now() + deadlineMs };
    return new Promise((resolve, reject) => {
      const onAbort = (): void => call.cancel();
      const call = fn.call(stub, request, this.metadata(), options, (err, response) => {
        signal?.removeEventListener("abort", onAbort);
        if (err && this.router.reroute(purgatory, err, hop, sentTo)) {
          this.call(method, request, deadlineMs, signal, hop + 1).then(resolve, reject);
        } else if (err) reject(fromGrpcError(err));
        else resolve(response);
      });
      if (signal?.aborted) call.cancel();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  // ------------------------------------------------------------ admin
  async createPurgatory(name: string, config?: PurgatoryConfig): Promise<PurgatoryInfo> {
    const req = { name, config: wire.configToWire(config) };
    return wire.infoFromWire((await this.call("CreatePurgatory", req, this.deadlineMs)).purgatory);
  }

  /** Delete a purgatory; resolves to the number of pending operations it cancelled. */
  async deletePurgatory(name: string): Promise<number> {
    return (await this.call("DeletePurgatory", { name }, this.deadlineMs)).cancelled;
  }

  async listPurgatories(): Promise<PurgatoryInfo[]> {
    const resp = await this.call("ListPurgatories", {}, this.deadlineMs);
    return resp.purgatories.map(wire.infoFromWire);
  }

  async getPurgatory(name?: string): Promise<PurgatoryInfo> {
    const req = { name: name ?? this.purgatory };
    return wire.infoFromWire((await this.call("GetPurgatory", req, this.deadlineMs)).purgatory);
  }

  // ------------------------------------------------------------ operations
  /** Kafka's tryCompleteElseWatch; with `wait: true` a long-poll (no re-send: see `wait`). */
  async tryCompleteElseWatch(
    keys: readonly string[],
    timeoutMs: number,
    options: WatchOptions = {},
  ): Promise<OperationStatus> {
    const payload = wire.bytes(options.payload);
    const req = {
      purgatory: this.name(options),
      operationId: options.operationId ?? "",
      keys: [...keys],
      timeoutMs,
      condition: wire.conditionToWire(options.condition),
      payload,
      wait: options.wait ?? false,
    };
    const deadline = options.deadlineMs ?? (options.wait ? null : this.deadlineMs);
    const resp = await this.call("TryCompleteElseWatch", req, deadline, options.signal);
    return wire.statusFromWire(resp, payload);
  }

  /**
   * The long-poll: register and resolve only once the operation has ended. A call failing
   * with UNAVAILABLE is re-sent with the same operation id (made up here if not given),
   * within `deadlineMs` if given, up to the client's `retry` policy.
   */
  async wait(
    keys: readonly string[],
    timeoutMs: number,
    options: Omit<WatchOptions, "wait"> = {},
  ): Promise<OperationStatus> {
    const operationId = options.operationId || randomUUID();
    const end = options.deadlineMs === undefined ? undefined : Date.now() + options.deadlineMs;
    for (let failures = 0; ; failures++) {
      const left = end === undefined ? undefined : Math.max(end - Date.now(), 0);
      try {
        return await this.tryCompleteElseWatch(keys, timeoutMs, {
          ...options,
          operationId,
          wait: true,
          deadlineMs: left,
        });
      } catch (err) {
        const delay = backoffMs(this.retry, failures);
        const late = end !== undefined && Date.now() + delay >= end;
        const stop = late || options.signal?.aborted === true;
        if (!(err instanceof UnavailableError) || failures >= this.retry.attempts || stop) {
          throw err;
        }
        await sleep(delay);
      }
    }
  }

  async batchTryCompleteElseWatch(
    operations: readonly OperationSpec[],
    options: CallTarget & { wait?: boolean; deadlineMs?: number; signal?: AbortSignal } = {},
  ): Promise<OperationStatus[]> {
    const req = {
      purgatory: this.name(options),
      operations: operations.map(wire.specToWire),
      wait: options.wait ?? false,
    };
    const deadline = options.deadlineMs ?? (options.wait ? null : this.deadlineMs);
    const resp = await this.call("BatchTryCompleteElseWatch", req, deadline, options.signal);
    return resp.operations.map((s: wire.WireMessage) => wire.statusFromWire(s));
  }

  /** Record a signal on `key`; resolves to the number of operations it completed. */
  async checkAndComplete(key: string, signal?: Signal, options: CallTarget = {}): Promise<number> {
    const req = { purgatory: this.name(options), key, signal: wire.signalToWire(signal) };
    return (await this.call("CheckAndComplete", req, this.deadlineMs)).completed;
  }

  /** Many signals in one call, applied in order: each a key, or a [key, signal] pair. */
  async batchCheckAndComplete(
    signals: ReadonlyArray<string | readonly [string, Signal | undefined]>,
    options: CallTarget = {},
  ): Promise<BatchSignalResult> {
    const items = signals.map((entry) =>
      typeof entry === "string"
        ? { key: entry, signal: wire.signalToWire(undefined) }
        : { key: entry[0], signal: wire.signalToWire(entry[1]) },
    );
    const req = { purgatory: this.name(options), signals: items };
    return wire.batchSignalFromWire(await this.call("BatchCheckAndComplete", req, this.deadlineMs));
  }

  /** End an operation now (FORCE_COMPLETED): the cancel of a delayed message. */
  async forceComplete(operationId: string, options: CallTarget = {}): Promise<ForceCompleteResult> {
    const req = { purgatory: this.name(options), operationId };
    return wire.forceFromWire(await this.call("ForceComplete", req, this.deadlineMs));
  }

  async getOperation(operationId: string, options: CallTarget = {}): Promise<OperationStatus> {
    const req = { purgatory: this.name(options), operationId };
    return wire.statusFromWire((await this.call("GetOperation", req, this.deadlineMs)).operation);
  }

  // ------------------------------------------------------------ streams
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
    const filter = {
      states: wire.statesToWire(options.states ?? []),
      keys: [...(options.keys ?? [])],
      operationIdPrefix: options.operationIdPrefix ?? "",
    };
    const purgatory = this.name(options);
    // hops: re-sends to a named owner since the last event (routing.ts).
    for (let failures = 0, hops = 0; ; ) {
      const req: Record<string, unknown> = { purgatory, filter, incarnation };
      if (position !== undefined) req.afterSequence = position;
      const sentTo = this.router.routes.get(purgatory) ?? "";
      const stub = this.router.stubFor(purgatory) ?? this.stub;
      const call = (stub.Subscribe as (r: unknown, m: Metadata) => ClientReadableStream<unknown>)
        .call(stub, req, this.metadata());
      call.on("error", () => undefined); // errors reach the loop below; never unhandled
      call.on("metadata", (md: Metadata) => {
        // Where this stream starts, and which incarnation its sequences belong to: both
        // are what the next resume sends back.
        const start = md.get(START_AFTER)[0];
        if (position === undefined && start !== undefined) position = Number(start);
        const current = String(md.get(INCARNATION)[0] ?? "");
        if (incarnation === "") incarnation = current;
      });
      let delay = 0;
      try {
        for await (const msg of call) {
          const event = wire.eventFromWire(msg, incarnation);
          position = event.sequence;
          failures = 0;
          hops = 0;
          yield event;
        }
        return;
      } catch (err) {
        if (this.router.reroute(purgatory, err, hops, sentTo)) {
          hops++; // refused, or the routed owner went away: re-open at once
          continue;
        }
        // A changed incarnation comes back as FAILED_PRECONDITION: StreamResetError.
        const error = fromGrpcError(err);
        const resumable = error instanceof SlowSubscriberError || error instanceof UnavailableError;
        if (!resumable || position === undefined || failures >= this.resume.attempts) throw error;
        delay = error instanceof SlowSubscriberError ? 0 : backoffMs(this.resume, failures);
        failures++;
      } finally {
        call.cancel();
      }
      await sleep(delay);
    }
  }

}

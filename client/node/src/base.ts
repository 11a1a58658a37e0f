/**
 * ClientBase: the channel, the plumbing every call shares (deadlines, the bearer token,
 * routing to a replicated purgatory's owner, errors) and the unary methods of purgatories
 * and operations. PurgatoryClient (client.ts) adds the rest on top of it (methods.ts:
 * delayed operations, schedules, worker groups' unary calls; client.ts: the streams).
 *
 * - `wait` (the long-poll) gives the operation an id when you give none and, if the call
 *   fails with UNAVAILABLE (server restarting, connection lost), re-sends the SAME request
 *   with backoff: the server answers a re-send of an id it knows with that operation's
 *   (possibly already final) state instead of registering it twice.
 * - every failure is a PurgatoryError subclass (errors.ts), never a raw grpc-js error.
 */
import { randomUUID } from "node:crypto";
import {
  Metadata,
  type CallOptions,
  type ChannelOptions,
  type ChannelCredentials,
  type Client,
} from "@grpc/grpc-js";

import {
  CONFIG_FIELDS,
  optionalString,
  requireCallOptions,
  requireInteger,
  requireOptions,
  requireSignal,
  requireString,
  requireStrings,
  WATCH_OPTIONS,
} from "./arguments.js";
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
import { fromGrpcError, UnavailableError } from "./errors.js";
import { purgatoryOf, Router } from "./routing.js";
import type {
  BatchSignalResult,
  Condition,
  ForceCompleteResult,
  OperationSpec,
  OperationStatus,
  PurgatoryConfig,
  PurgatoryInfo,
  RetryPolicy,
  Signal,
} from "./models.js";

export const DEFAULT_PURGATORY = "default";

/**
 * Liveness of the connection (docs/clients.md "Failover"), as in the Python clients: while
 * a call is open the client pings every 2 s and closes the connection when a ping is not
 * answered within 2 s, so a call to a paused, cut-off or silently lost server fails
 * UNAVAILABLE within ~4 s instead of waiting for its deadline, and a routed call then
 * re-resolves the owner (routing.ts). A lost server is retried at least every 5 s.
 * `channelOptions` override each of them.
 */
export const KEEPALIVE_OPTIONS: Readonly<ChannelOptions> = {
  "grpc.keepalive_time_ms": 2000,
  "grpc.keepalive_timeout_ms": 2000,
  "grpc.max_reconnect_backoff_ms": 5000,
};

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
  /** grpc-js channel options ("grpc.keepalive_time_ms", ...), over KEEPALIVE_OPTIONS. */
  channelOptions?: ChannelOptions;
}

export interface CallTarget {
  /** The purgatory (default: the client's). */
  purgatory?: string;
}

export interface WatchOptions extends CallTarget {
  condition?: Condition;
  payload?: Uint8Array | string;
  /** Unique per purgatory; when empty `wait` makes one up, `tryCompleteElseWatch` lets the
   * server. */
  operationId?: string;
  /** Long-poll: answer only once the operation has ended. */
  wait?: boolean;
  /** Instead of `timeoutMs` (give 0 there): an absolute deadline, Unix epoch ms (server clock). */
  dueTimeMs?: number;
  /** Debounce: a re-send of this id while pending pushes its deadline to now + timeoutMs. */
  extendOnResend?: boolean;
  /** With extendOnResend: never past createTimeMs + maxExtendMs (0: no cap). */
  maxExtendMs?: number;
  /** This call's deadline in ms (a waiting call has none unless given). */
  deadlineMs?: number;
  /** Aborting it cancels the call (CancelledError); the operation stays registered. */
  signal?: AbortSignal;
}

type Unary = (
  request: unknown,
  metadata: Metadata,
  options: CallOptions,
  callback: (err: unknown, response: wire.WireMessage) => void,
) => { cancel(): void };

export class ClientBase {
  readonly purgatory: string;
  readonly deadlineMs: number | null;
  protected readonly stub: Client & Record<string, unknown>;
  protected readonly auth: Metadata | undefined;
  protected readonly resume: Required<RetryPolicy>;
  protected readonly retry: Required<RetryPolicy>;
  /** Replicated purgatories: routes to owners (routing.ts). */
  protected readonly router: Router<Client & Record<string, unknown>>;

  constructor(target = "127.0.0.1:50051", options: ClientOptions = {}) {
    this.purgatory = options.purgatory ?? DEFAULT_PURGATORY;
    this.deadlineMs = options.deadlineMs === undefined ? 30_000 : options.deadlineMs;
    this.auth = authMetadata(options.token);
    this.resume = retryPolicy(options.resume);
    this.retry = retryPolicy(options.retry);
    const tls = options.credentials ? undefined : resolveTls(options.tls);
    const channelOptions: ChannelOptions = { ...KEEPALIVE_OPTIONS, ...(options.channelOptions ?? {}) };
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
  protected metadata(): Metadata {
    return this.auth ? this.auth.clone() : new Metadata();
  }

  /** The stub that serves `purgatory`: its owner's if routed (routing.ts), else the client's. */
  protected stubFor(purgatory: string): Client & Record<string, unknown> {
    return this.router.stubFor(purgatory) ?? this.stub;
  }

  protected name(target: CallTarget | undefined): string {
    return target?.purgatory ?? this.purgatory;
  }

  protected call(
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
    requireString("createPurgatory", "name", name);
    requireOptions("createPurgatory", "config", config, CONFIG_FIELDS);
    const req = { name, config: wire.configToWire(config) };
    return wire.infoFromWire((await this.call("CreatePurgatory", req, this.deadlineMs)).purgatory);
  }

  /** Delete a purgatory; resolves to the number of pending operations it cancelled. */
  async deletePurgatory(name: string): Promise<number> {
    requireString("deletePurgatory", "name", name);
    return (await this.call("DeletePurgatory", { name }, this.deadlineMs)).cancelled;
  }

  async listPurgatories(): Promise<PurgatoryInfo[]> {
    const resp = await this.call("ListPurgatories", {}, this.deadlineMs);
    return resp.purgatories.map(wire.infoFromWire);
  }

  async getPurgatory(name?: string): Promise<PurgatoryInfo> {
    if (name !== undefined) requireString("getPurgatory", "name", name);
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
    checkWatch("tryCompleteElseWatch", keys, timeoutMs, options, WATCH_OPTIONS);
    const payload = wire.bytes(options.payload);
    const req = {
      purgatory: this.name(options),
      operationId: options.operationId ?? "",
      keys: [...keys],
      timeoutMs,
      condition: wire.conditionToWire(options.condition),
      payload,
      wait: options.wait ?? false,
      dueTimeMs: options.dueTimeMs ?? 0,
      extendOnResend: options.extendOnResend ?? false,
      maxExtendMs: options.maxExtendMs ?? 0,
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
    checkWatch("wait", keys, timeoutMs, options, WAIT_OPTIONS);
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
    const method = "batchTryCompleteElseWatch";
    if (!Array.isArray(operations)) requireStrings(method, "operations", operations);
    requireCallOptions(method, "options", options, ["purgatory", "wait", "deadlineMs", "signal"]);
    const specs = operations.map(wire.specToWire);
    const req = { purgatory: this.name(options), operations: specs, wait: options.wait ?? false };
    const deadline = options.deadlineMs ?? (options.wait ? null : this.deadlineMs);
    const resp = await this.call("BatchTryCompleteElseWatch", req, deadline, options.signal);
    // The answer carries no payloads (the caller sent them): each status gets its own back.
    return resp.operations.map((s: wire.WireMessage, i: number) =>
      wire.statusFromWire(s, specs[i].payload as Buffer),
    );
  }

  /** Record a signal on `key`; resolves to the number of operations it completed. */
  async checkAndComplete(key: string, signal?: Signal, options: CallTarget = {}): Promise<number> {
    requireString("checkAndComplete", "key", key, true);
    requireSignal("checkAndComplete", "signal", signal, "third");
    requireCallOptions("checkAndComplete", "options", options);
    const req = { purgatory: this.name(options), key, signal: wire.signalToWire(signal) };
    return (await this.call("CheckAndComplete", req, this.deadlineMs)).completed;
  }

  /** Many signals in one call, applied in order: each a key, or a [key, signal] pair. */
  async batchCheckAndComplete(
    signals: ReadonlyArray<string | readonly [string, Signal | undefined]>,
    options: CallTarget = {},
  ): Promise<BatchSignalResult> {
    const method = "batchCheckAndComplete";
    if (!Array.isArray(signals)) requireStrings(method, "signals", signals);
    signals.forEach((entry, i) => {
      if (typeof entry === "string") return;
      if (!Array.isArray(entry) || entry.length < 1 || entry.length > 2) {
        requireString(method, `signals[${i}]`, entry); // neither a key nor a [key, signal]
      }
      requireString(method, `signals[${i}][0]`, entry[0], true);
      requireSignal(method, `signals[${i}][1]`, entry[1], "second (options)");
    });
    requireCallOptions(method, "options", options);
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
    requireString("forceComplete", "operationId", operationId);
    requireCallOptions("forceComplete", "options", options);
    const req = { purgatory: this.name(options), operationId };
    return wire.forceFromWire(await this.call("ForceComplete", req, this.deadlineMs));
  }

  async getOperation(operationId: string, options: CallTarget = {}): Promise<OperationStatus> {
    requireString("getOperation", "operationId", operationId);
    requireCallOptions("getOperation", "options", options);
    const req = { purgatory: this.name(options), operationId };
    return wire.statusFromWire((await this.call("GetOperation", req, this.deadlineMs)).operation);
  }
}

const WAIT_OPTIONS = WATCH_OPTIONS.filter((name) => name !== "wait");

/** A watch's arguments: keys, a timeout, the options `method` takes. */
function checkWatch(
  method: string,
  keys: unknown,
  timeoutMs: unknown,
  options: unknown,
  allowed: readonly string[],
): void {
  requireStrings(method, "keys", keys);
  requireInteger(method, "timeoutMs", timeoutMs);
  requireCallOptions(method, "options", options, allowed);
  const given = options as { operationId?: unknown } | undefined;
  optionalString(method, "options.operationId", given?.operationId);
}

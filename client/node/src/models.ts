/**
 * Typed inputs and results of the client API (no gRPC, no I/O), the same shapes as the
 * Python client's purgatory_client._models, in camelCase.
 *
 * Times are Unix epoch milliseconds as sent by the server. 64-bit integers are JavaScript
 * numbers: exact up to 2^53 (sequences, times, sums and offsets stay far below that).
 */

/** The life cycle of an operation (the wire enum purgatory.v1.OperationState). */
export const OperationState = {
  UNSPECIFIED: "UNSPECIFIED",
  WATCHING: "WATCHING",
  COMPLETED: "COMPLETED",
  EXPIRED: "EXPIRED",
  FORCE_COMPLETED: "FORCE_COMPLETED",
  CANCELLED: "CANCELLED",
} as const;
export type OperationState = (typeof OperationState)[keyof typeof OperationState];

/** The wire numbers of OperationState, in enum order. */
export const STATE_NUMBERS: Readonly<Record<OperationState, number>> = {
  UNSPECIFIED: 0,
  WATCHING: 1,
  COMPLETED: 2,
  EXPIRED: 3,
  FORCE_COMPLETED: 4,
  CANCELLED: 5,
};

export function isFinal(state: OperationState): boolean {
  return state !== "UNSPECIFIED" && state !== "WATCHING";
}

/** A JSON value, as attributes hold them. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * A condition's expressions (docs/conditions.md), each optional, with any kind: a CEL
 * `filter` over `signal` and `op` (only signals for which it is true count), a CEL
 * `predicate` over `result` and `op` (judged once the kind holds), a `match` attribute path
 * (only signals whose attribute equals the operation's count; indexed) and the operation's
 * own `attributes` (`op.attributes`).
 */
export interface Expressions {
  filter?: string;
  predicate?: string;
  match?: string;
  attributes?: Readonly<Record<string, JsonValue>>;
}

/** When an operation completes; build one with the `Condition.*` functions. */
export type Condition = (
  | { kind: "anyKey" }
  | { kind: "allKeys" }
  | { kind: "minSignals"; count: number; distinctSources: boolean }
  | { kind: "sumAtLeast"; threshold: number }
  | { kind: "valuesAtLeast"; targets: Readonly<Record<string, number>>; defaultTarget: number }
) &
  Expressions;

export const Condition = {
  /** The first signal on any key (the default). */
  anyKey: (): Condition => ({ kind: "anyKey" }),
  /** Every key signalled at least once. */
  allKeys: (): Condition => ({ kind: "allKeys" }),
  /** `count` signals; with `distinctSources` each source counts once (acks from N replicas). */
  minSignals: (count: number, opts: { distinctSources?: boolean } = {}): Condition => ({
    kind: "minSignals",
    count,
    distinctSources: opts.distinctSources ?? false,
  }),
  /** The sum of the signals' `amount` reaches `threshold` (a min-bytes fetch). */
  sumAtLeast: (threshold: number): Condition => ({ kind: "sumAtLeast", threshold }),
  /** Every key's latest `value` >= its target (`defaultTarget` for keys not listed). */
  valuesAtLeast: (
    targets: Record<string, number> = {},
    opts: { defaultTarget?: number } = {},
  ): Condition => ({
    kind: "valuesAtLeast",
    targets: Object.freeze({ ...targets }),
    defaultTarget: opts.defaultTarget ?? 0,
  }),
  /**
   * `condition` with expressions, e.g.
   * `Condition.where(Condition.minSignals(2, { distinctSources: true }), { filter: "signal.attributes.role == 'finance'" })`.
   */
  where: (condition: Condition, expressions: Expressions): Condition => ({
    ...condition,
    ...expressions,
  }),
};

/** What CheckAndComplete records on a key. */
export interface Signal {
  /** Added to sums (bytes, records...). */
  amount?: number;
  /** The key's new latest value (an offset); absent leaves it unchanged. */
  value?: number;
  /** Who sent it (a replica id), for distinct-source counting. */
  source?: string;
  /** Opaque bytes accumulated into the result (a string is sent as UTF-8). */
  data?: Uint8Array | string;
  /** A JSON object that conditions' expressions and `match` read (`signal.attributes`). */
  attributes?: Readonly<Record<string, JsonValue>>;
}

/** One operation of a batch registration. */
export interface OperationSpec {
  keys: readonly string[];
  timeoutMs: number;
  condition?: Condition;
  payload?: Uint8Array | string;
  operationId?: string;
  /** Instead of `timeoutMs` (give 0 there): an absolute deadline, Unix epoch ms (server clock). */
  dueTimeMs?: number;
  /** Debounce: a re-send of this id while it is pending pushes its deadline to now + timeoutMs. */
  extendOnResend?: boolean;
  /** With extendOnResend: never past createTimeMs + maxExtendMs (0: no cap). */
  maxExtendMs?: number;
}

/** What the signals added up to when the operation ended. */
export interface OperationResult {
  readonly signalCount: number;
  readonly sources: readonly string[];
  readonly signalledKeys: readonly string[];
  readonly amountSum: number;
  readonly values: Readonly<Record<string, number>>;
  readonly data: Buffer;
  readonly dataTruncated: boolean;
  /** Conditions with expressions: the key of the last signal that counted ("" if none). */
  readonly matchedKey: string;
  /** ...and its attributes (undefined when it had none). */
  readonly matchedAttributes: Readonly<Record<string, JsonValue>> | undefined;
}

export interface OperationStatus {
  readonly operationId: string;
  readonly state: OperationState;
  readonly result: OperationResult;
  /** The outcome's sequence once final and published (0 while watching). */
  readonly sequence: number;
  /** True if this call registered the operation (false for an idempotent re-send). */
  readonly created: boolean;
  readonly createTimeMs: number;
  readonly dueTimeMs: number;
  readonly completeTimeMs: number;
  readonly payload: Buffer;
  /** W3C traceparent of the registering request, when the server traces ("" otherwise). */
  readonly traceparent: string;
}

/** One outcome from a subscription. */
export interface Event {
  readonly sequence: number;
  readonly purgatory: string;
  readonly operationId: string;
  readonly state: OperationState;
  readonly keys: readonly string[];
  readonly payload: Buffer;
  readonly result: OperationResult;
  readonly createTimeMs: number;
  readonly dueTimeMs: number;
  readonly completeTimeMs: number;
  /** The stream's incarnation ("" from a server without them): store it with `sequence`
   * to resume later with `subscribe({ afterSequence, incarnation })`. */
  readonly incarnation: string;
  /** W3C traceparent of the registering request, when the server traces ("" otherwise). */
  readonly traceparent: string;
  /** A heartbeat, not an outcome (subscribe with `heartbeatIntervalMs`): every other field
   * is empty and `caughtUpSequence` says every matching outcome up to it was delivered. */
  readonly heartbeat: boolean;
  readonly caughtUpSequence: number;
}

/** One page of listOperations: statuses in operation id order, with progress so far. */
export interface OperationPage {
  readonly operations: readonly OperationStatus[];
  /** "" when there is nothing more; pass it back (same filter) for the next page. A page
   * may be short, even empty, while it is set. */
  readonly nextPageToken: string;
}

export interface ForceCompleteResult {
  /** True only if this call ended the operation. */
  readonly completed: boolean;
  readonly operation: OperationStatus;
}

export interface BatchSignalResult {
  readonly completed: number;
  readonly completedPerSignal: readonly number[];
}

/** Engine settings; 0 (or absent) means the server default when creating. */
export interface PurgatoryConfig {
  tickMs?: number;
  wheelSize?: number;
  purgeInterval?: number;
  maxPending?: number;
  retainedEvents?: number;
  durable?: boolean;
}

export interface PurgatoryInfo {
  readonly name: string;
  readonly config: Required<PurgatoryConfig>;
  readonly pending: number;
  readonly watchedKeys: number;
  readonly lastSequence: number;
  readonly oldestSequence: number;
  readonly subscribers: number;
  /** The event stream's incarnation ("" from a server that predates incarnations). */
  readonly incarnation: string;
}

/** How a dropped subscription (or a long-poll refused with UNAVAILABLE) is retried. */
export interface RetryPolicy {
  /** Attempts in a row without progress before the error is raised (default 8). */
  attempts?: number;
  /** First back-off in ms, doubled on each attempt (default 50). */
  initialDelayMs?: number;
  /** Back-off cap in ms (default 2000). */
  maxDelayMs?: number;
}

/**
 * The wire edge with no I/O: loading the service definition, building request objects and
 * turning response objects into the typed models. The shapes here are @grpc/proto-loader's
 * (camelCase fields, 64-bit integers as numbers, enums as numbers, bytes as Buffer).
 */
import * as protoLoader from "@grpc/proto-loader";
import { loadPackageDefinition, type ServiceClientConstructor } from "@grpc/grpc-js";

import {
  OperationState,
  STATE_NUMBERS,
  type BatchSignalResult,
  type Condition,
  type Event,
  type ForceCompleteResult,
  type JsonValue,
  type OperationResult,
  type OperationSpec,
  type OperationStatus,
  type PurgatoryConfig,
  type PurgatoryInfo,
  type Signal,
} from "./models.js";

import { DESCRIPTOR } from "./gen/descriptor.js";

let serviceCtor: ServiceClientConstructor | undefined;

export function serviceClient(): ServiceClientConstructor {
  if (serviceCtor === undefined) {
    // The descriptor is proto/purgatory/v1 as JSON, embedded at build time (scripts/build.js).
    const json = DESCRIPTOR as Parameters<typeof protoLoader.fromJSON>[0];
    const definition = protoLoader.fromJSON(json, {
      longs: Number,
      enums: Number,
      bytes: Buffer,
      defaults: true,
      oneofs: true,
    });
    const pkg = loadPackageDefinition(definition) as unknown as {
      purgatory: { v1: { PurgatoryService: ServiceClientConstructor } };
    };
    serviceCtor = pkg.purgatory.v1.PurgatoryService;
  }
  return serviceCtor;
}

// ------------------------------------------------------------------ requests
type Wire = Record<string, unknown>;

export function bytes(value: Uint8Array | string | undefined): Buffer {
  if (value === undefined) return Buffer.alloc(0);
  return typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value);
}

export function conditionToWire(condition: Condition | undefined): Wire {
  const wire = kindToWire(condition);
  const c = condition;
  if (c !== undefined && (c.filter || c.predicate || c.match || c.attributes !== undefined)) {
    wire.filter = c.filter ?? "";
    wire.predicate = c.predicate ?? "";
    wire.match = c.match ?? "";
    if (c.attributes !== undefined) wire.attributes = structToWire(c.attributes);
  }
  return wire;
}

/** A JSON object as a google.protobuf.Struct in proto-loader's shape. */
export function structToWire(object: Readonly<Record<string, JsonValue>>): Wire {
  const fields: Record<string, Wire> = {};
  for (const [key, value] of Object.entries(object)) fields[key] = valueToWire(value);
  return { fields };
}

function valueToWire(value: JsonValue): Wire {
  if (value === null || value === undefined) return { nullValue: 0 };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number") return { numberValue: value };
  if (typeof value === "string") return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(valueToWire) } };
  return { structValue: structToWire(value) };
}

/** A decoded google.protobuf.Struct back as a JSON object. */
export function structFromWire(m: WireMessage): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(m?.fields ?? {})) out[key] = valueFromWire(value);
  return out;
}

function valueFromWire(m: WireMessage): JsonValue {
  switch (m?.kind) {
    case "boolValue":
      return m.boolValue;
    case "numberValue":
      return m.numberValue;
    case "stringValue":
      return m.stringValue;
    case "listValue":
      return (m.listValue?.values ?? []).map(valueFromWire);
    case "structValue":
      return structFromWire(m.structValue);
    default:
      return null;
  }
}

function kindToWire(condition: Condition | undefined): Wire {
  const c = condition ?? { kind: "anyKey" };
  switch (c.kind) {
    case "anyKey":
      return { anyKey: {} };
    case "allKeys":
      return { allKeys: {} };
    case "minSignals":
      return { minSignals: { count: c.count, distinctSources: c.distinctSources } };
    case "sumAtLeast":
      return { sumAtLeast: { threshold: c.threshold } };
    case "valuesAtLeast":
      return { valuesAtLeast: { targets: { ...c.targets }, defaultTarget: c.defaultTarget } };
  }
}

export function signalToWire(signal: Signal | undefined): Wire {
  const s = signal ?? {};
  const wire: Wire = { amount: s.amount ?? 0, source: s.source ?? "", data: bytes(s.data) };
  if (s.value !== undefined) wire.value = s.value;
  if (s.attributes !== undefined) wire.attributes = structToWire(s.attributes);
  return wire;
}

export function specToWire(spec: OperationSpec): Wire {
  return {
    operationId: spec.operationId ?? "",
    keys: [...spec.keys],
    timeoutMs: spec.timeoutMs,
    condition: conditionToWire(spec.condition),
    payload: bytes(spec.payload),
    dueTimeMs: spec.dueTimeMs ?? 0,
    extendOnResend: spec.extendOnResend ?? false,
    maxExtendMs: spec.maxExtendMs ?? 0,
  };
}

export function configToWire(config: PurgatoryConfig | undefined): Wire {
  const c = config ?? {};
  return {
    tickMs: c.tickMs ?? 0,
    wheelSize: c.wheelSize ?? 0,
    purgeInterval: c.purgeInterval ?? 0,
    maxPending: c.maxPending ?? 0,
    retainedEvents: c.retainedEvents ?? 0,
    durable: c.durable ?? false,
  };
}

export function statesToWire(states: readonly OperationState[]): number[] {
  return states.map((s) => STATE_NUMBERS[s]);
}

// ------------------------------------------------------------------ responses
const STATE_NAMES: readonly OperationState[] = [
  OperationState.UNSPECIFIED,
  OperationState.WATCHING,
  OperationState.COMPLETED,
  OperationState.EXPIRED,
  OperationState.FORCE_COMPLETED,
  OperationState.CANCELLED,
];

/** A response message as proto-loader decodes it (defaults filled in). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type WireMessage = any;

/** Back from a wire Condition (oneof `kind`, as proto-loader names the field set). */
export function conditionFromWire(m: WireMessage): Condition {
  const kind = kindFromWire(m);
  if (!m || !(m.filter || m.predicate || m.match || m.attributes)) return kind;
  const expressions: Record<string, unknown> = {};
  if (m.filter) expressions.filter = m.filter;
  if (m.predicate) expressions.predicate = m.predicate;
  if (m.match) expressions.match = m.match;
  if (m.attributes) expressions.attributes = Object.freeze(structFromWire(m.attributes));
  return { ...kind, ...expressions };
}

function kindFromWire(m: WireMessage): Condition {
  switch (m?.kind) {
    case "allKeys":
      return { kind: "allKeys" };
    case "minSignals":
      return {
        kind: "minSignals",
        count: m.minSignals.count,
        distinctSources: m.minSignals.distinctSources,
      };
    case "sumAtLeast":
      return { kind: "sumAtLeast", threshold: m.sumAtLeast.threshold };
    case "valuesAtLeast":
      return {
        kind: "valuesAtLeast",
        targets: Object.freeze({ ...m.valuesAtLeast.targets }),
        defaultTarget: m.valuesAtLeast.defaultTarget,
      };
    default:
      return { kind: "anyKey" };
  }
}

export function stateFromWire(n: number): OperationState {
  return STATE_NAMES[n] ?? OperationState.UNSPECIFIED;
}

export function resultFromWire(m: WireMessage): OperationResult {
  const r = m ?? {};
  return Object.freeze({
    signalCount: r.signalCount ?? 0,
    sources: Object.freeze([...(r.sources ?? [])]),
    signalledKeys: Object.freeze([...(r.signalledKeys ?? [])]),
    amountSum: r.amountSum ?? 0,
    values: Object.freeze({ ...(r.values ?? {}) }),
    data: r.data ?? Buffer.alloc(0),
    dataTruncated: r.dataTruncated ?? false,
    matchedKey: r.matchedKey ?? "",
    matchedAttributes: r.matchedAttributes ? Object.freeze(structFromWire(r.matchedAttributes)) : undefined,
  });
}

/** From an OperationStatus or a TryCompleteElseWatchResponse (same field names). */
export function statusFromWire(m: WireMessage, payload?: Buffer): OperationStatus {
  return Object.freeze({
    operationId: m.operationId,
    state: stateFromWire(m.state),
    result: resultFromWire(m.result),
    sequence: m.sequence,
    created: m.created,
    createTimeMs: m.createTimeMs,
    dueTimeMs: m.dueTimeMs,
    completeTimeMs: m.completeTimeMs,
    payload: payload ?? m.payload ?? Buffer.alloc(0),
    traceparent: m.traceparent ?? "",
  });
}

export function forceFromWire(m: WireMessage): ForceCompleteResult {
  return Object.freeze({ completed: m.completed, operation: statusFromWire(m.operation) });
}

export function batchSignalFromWire(m: WireMessage): BatchSignalResult {
  return Object.freeze({
    completed: m.completed,
    completedPerSignal: Object.freeze([...m.completedPerSignal]),
  });
}

export function eventFromWire(m: WireMessage, incarnation: string): Event {
  return Object.freeze({
    sequence: m.sequence,
    purgatory: m.purgatory,
    operationId: m.operationId,
    state: stateFromWire(m.state),
    keys: Object.freeze([...m.keys]),
    payload: m.payload,
    result: resultFromWire(m.result),
    createTimeMs: m.createTimeMs,
    dueTimeMs: m.dueTimeMs,
    completeTimeMs: m.completeTimeMs,
    incarnation,
    traceparent: m.traceparent ?? "",
    heartbeat: m.heartbeat ?? false,
    caughtUpSequence: m.caughtUpSequence ?? 0,
  });
}

export function infoFromWire(m: WireMessage): PurgatoryInfo {
  const c = m.config ?? {};
  return Object.freeze({
    name: m.name,
    config: Object.freeze({
      tickMs: c.tickMs ?? 0,
      wheelSize: c.wheelSize ?? 0,
      purgeInterval: c.purgeInterval ?? 0,
      maxPending: c.maxPending ?? 0,
      retainedEvents: c.retainedEvents ?? 0,
      durable: c.durable ?? false,
    }),
    pending: m.pending,
    watchedKeys: m.watchedKeys,
    lastSequence: m.lastSequence,
    oldestSequence: m.oldestSequence,
    subscribers: m.subscribers,
    incarnation: m.incarnation ?? "",
  });
}

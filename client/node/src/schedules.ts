/**
 * Recurring schedules (docs/service.md "Recurring schedules"): the models and the wire
 * conversions, as the Python client's _schedules.
 *
 * A schedule fires every `everyMs` (on the Unix-epoch grid) or at the times a five-field
 * `cron` expression names in `timeZone`; each firing is an operation with the id
 * "<scheduleId>@<fire time ms>" due at its fire time, watching the template's keys: it
 * EXPIRES at its fire time (the firing) or COMPLETES earlier when the template's condition
 * is met ("unless" semantics). Whatever its outcome, the next occurrence is armed.
 */
import * as wire from "./convert.js";
import { invalidArgument } from "./errors.js";
import type { Condition } from "./models.js";

export interface ScheduleOptions {
  /** Fixed interval (at least 100): exactly one of everyMs and cron. */
  everyMs?: number;
  /** A five-field cron expression (names and @daily-style aliases allowed). */
  cron?: string;
  /** IANA zone for cron ("Europe/Paris"); "" is UTC. */
  timeZone?: string;
  /** Keys each occurrence watches while armed (none: a pure timer). */
  keys?: readonly string[];
  /** Completes an occurrence before its fire time (default anyKey). */
  condition?: Condition;
  /** Echoed in every occurrence's outcome. */
  payload?: Uint8Array | string;
  purgatory?: string;
}

export interface Schedule {
  readonly scheduleId: string;
  /** Non-zero for an interval schedule; else `cron` is set. */
  readonly everyMs: number;
  readonly cron: string;
  readonly timeZone: string;
  readonly keys: readonly string[];
  readonly condition: Condition;
  readonly payload: Buffer;
  /** The armed occurrence, "<scheduleId>@<nextFireTimeMs>" ("" and 0 while none is). */
  readonly nextOperationId: string;
  readonly nextFireTimeMs: number;
  readonly updateTimeMs: number;
}

export interface ScheduleUpsert {
  readonly schedule: Schedule;
  /** True if the schedule id was new. */
  readonly created: boolean;
  /** False for a re-send of the same definition: nothing changed. */
  readonly changed: boolean;
}

export function scheduleSpecToWire(
  scheduleId: string,
  o: ScheduleOptions,
): Record<string, unknown> {
  if ((o.everyMs === undefined) === (o.cron === undefined)) {
    throw invalidArgument("timing", "give exactly one of everyMs or cron");
  }
  const spec: Record<string, unknown> = {
    scheduleId,
    timeZone: o.timeZone ?? "",
    template: {
      keys: [...(o.keys ?? [])],
      condition: wire.conditionToWire(o.condition),
      payload: wire.bytes(o.payload),
    },
  };
  if (o.everyMs !== undefined) spec.everyMs = o.everyMs;
  else spec.cron = o.cron;
  return spec;
}

export function scheduleFromWire(m: wire.WireMessage): Schedule {
  const spec = m.spec;
  const template = spec.template ?? {};
  return Object.freeze({
    scheduleId: spec.scheduleId,
    everyMs: spec.timing === "everyMs" ? spec.everyMs : 0,
    cron: spec.timing === "cron" ? spec.cron : "",
    timeZone: spec.timeZone,
    keys: Object.freeze([...(template.keys ?? [])]),
    condition: wire.conditionFromWire(template.condition),
    payload: template.payload ?? Buffer.alloc(0),
    nextOperationId: m.nextOperationId,
    nextFireTimeMs: m.nextFireTimeMs,
    updateTimeMs: m.updateTimeMs,
  });
}

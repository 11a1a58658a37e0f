/**
 * The client's unary methods beyond purgatories and operations (a layer of the client, as
 * the Python client's mix-ins _async_delayed, _async_schedules and _async_groups):
 * cancel and reschedule pending operations, list and iterate operations with their
 * progress, recurring schedules, and the worker groups' acks, leases and dead letters.
 */
import type { Metadata } from "@grpc/grpc-js";

import { AckStreams, type AckDuplex } from "./acks.js";
import {
  requireCallOptions,
  requireInteger,
  requireString,
  requireStrings,
} from "./arguments.js";
import * as wire from "./convert.js";
import { ClientBase, type CallTarget } from "./base.js";
import { invalidArgument } from "./errors.js";
import {
  ackResultFromWire,
  deliveryFromWire,
  groupFromWire,
  type AckEntry,
  type AckResult,
  type DeadLetterPage,
  type GroupInfo,
  type NackResult,
} from "./groups.js";
import type { OperationPage, OperationState, OperationStatus } from "./models.js";
import {
  scheduleFromWire,
  scheduleSpecToWire,
  type Schedule,
  type ScheduleOptions,
  type ScheduleUpsert,
} from "./schedules.js";

export interface CancelOptions extends CallTarget {
  /** Every pending operation watching this key (instead of ids). */
  key?: string;
  /** Every pending operation whose id starts with this (instead of ids). */
  prefix?: string;
}

export interface RescheduleOptions extends CallTarget {
  /** The new deadline from now (server clock); exactly one of this and dueTimeMs. */
  timeoutMs?: number;
  /** The new deadline, Unix epoch ms (server clock). */
  dueTimeMs?: number;
}

export interface ListFilter extends CallTarget {
  /** Operations watching this key. */
  key?: string;
  /** Operations whose id starts with this. */
  prefix?: string;
  /** Empty: pending only (WATCHING); final states select recently ended ones. */
  states?: readonly OperationState[];
  /** Due time range, epoch ms: dueAfterMs <= due < dueBeforeMs (0: no bound). */
  dueAfterMs?: number;
  dueBeforeMs?: number;
  /** 0: the server's default (100); at most 1000. */
  pageSize?: number;
}

const LIST_FILTER = [
  "purgatory",
  "key",
  "prefix",
  "states",
  "dueAfterMs",
  "dueBeforeMs",
  "pageSize",
  "pageToken",
];
const SCHEDULE_OPTIONS = [
  "purgatory",
  "everyMs",
  "cron",
  "timeZone",
  "keys",
  "condition",
  "payload",
];

export class UnaryMethods extends ClientBase {
  /** ackBatch's streams (acks.ts). */
  private readonly acks = new AckStreams(
    (stub) => (stub.AckStream as (m: Metadata) => AckDuplex).call(stub, this.metadata()),
    (request) => this.call("AckBatch", request, this.deadlineMs),
    this.deadlineMs,
  );

  override close(): void {
    this.acks.close();
    super.close();
  }

  // ------------------------------------------------------------ delayed operations
  /**
   * End pending operations as CANCELLED: by ids, or every one watching `key`, or every one
   * whose id starts with `prefix` (exactly one). Resolves to those this call ended (each
   * with its outcome's sequence); calling it again resolves to none.
   */
  async cancel(
    operationIds?: readonly string[],
    options: CancelOptions = {},
  ): Promise<OperationStatus[]> {
    if (operationIds !== undefined) requireStrings("cancel", "operationIds", operationIds);
    requireCallOptions("cancel", "options", options, ["purgatory", "key", "prefix"]);
    const given = [operationIds, options.key, options.prefix].filter((x) => x !== undefined);
    if (given.length !== 1) {
      throw invalidArgument("target", "give exactly one of operationIds, key or prefix");
    }
    const req: Record<string, unknown> = { purgatory: this.name(options) };
    if (operationIds !== undefined) req.operationIds = { ids: [...operationIds] };
    else if (options.key !== undefined) req.key = options.key;
    else req.operationIdPrefix = options.prefix;
    const resp = await this.call("Cancel", req, this.deadlineMs);
    return resp.cancelled.map((s: wire.WireMessage) => wire.statusFromWire(s));
  }

  /** Move a pending operation's deadline; FailedPreconditionError once it has ended. */
  async reschedule(operationId: string, options: RescheduleOptions): Promise<OperationStatus> {
    requireString("reschedule", "operationId", operationId);
    requireCallOptions("reschedule", "options", options, ["purgatory", "timeoutMs", "dueTimeMs"]);
    options ??= {};
    if ((options.timeoutMs === undefined) === (options.dueTimeMs === undefined)) {
      throw invalidArgument("deadline", "give exactly one of timeoutMs or dueTimeMs");
    }
    const req: Record<string, unknown> = { purgatory: this.name(options), operationId };
    if (options.timeoutMs !== undefined) req.timeoutMs = options.timeoutMs;
    else req.dueTimeMs = options.dueTimeMs;
    const resp = await this.call("Reschedule", req, this.deadlineMs);
    return wire.statusFromWire(resp.operation);
  }

  /**
   * One page of pending operations (no `states`) or recently ended ones, in operation id
   * order, each with its progress so far. Pass `nextPageToken` back as `pageToken`, with
   * the same filter, for the next page; a page may be short or empty while it is set.
   */
  async listOperations(filter: ListFilter & { pageToken?: string } = {}): Promise<OperationPage> {
    requireCallOptions("listOperations", "filter", filter, LIST_FILTER);
    const req = {
      purgatory: this.name(filter),
      filter: {
        key: filter.key ?? "",
        operationIdPrefix: filter.prefix ?? "",
        states: wire.statesToWire(filter.states ?? []),
        dueAfterMs: filter.dueAfterMs ?? 0,
        dueBeforeMs: filter.dueBeforeMs ?? 0,
      },
      pageToken: filter.pageToken ?? "",
      pageSize: filter.pageSize ?? 0,
    };
    const resp = await this.call("ListOperations", req, this.deadlineMs);
    return Object.freeze({
      operations: Object.freeze(
        resp.operations.map((s: wire.WireMessage) => wire.statusFromWire(s)),
      ),
      nextPageToken: resp.nextPageToken,
    });
  }

  /** Every operation listOperations selects, page after page (one pending throughout is
   * yielded exactly once). Breaking out of the loop stops the paging. */
  async *iterOperations(filter: ListFilter = {}): AsyncGenerator<OperationStatus, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listOperations({ ...filter, pageToken });
      yield* page.operations;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  // ------------------------------------------------------------ schedules
  /**
   * Create or replace a recurring schedule (every `everyMs`, or `cron` in `timeZone`).
   * Re-sending the same definition changes nothing (`changed` false).
   */
  async upsertSchedule(scheduleId: string, options: ScheduleOptions): Promise<ScheduleUpsert> {
    requireString("upsertSchedule", "scheduleId", scheduleId);
    requireCallOptions("upsertSchedule", "options", options, SCHEDULE_OPTIONS);
    const schedule = scheduleSpecToWire(scheduleId, options);
    const req = { purgatory: this.name(options), schedule };
    const resp = await this.call("UpsertSchedule", req, this.deadlineMs);
    return Object.freeze({
      schedule: scheduleFromWire(resp.schedule),
      created: resp.created,
      changed: resp.changed,
    });
  }

  /** Delete a schedule (NotFoundError if unknown); resolves to its armed occurrence, now
   * CANCELLED, if one was pending, else null. */
  async deleteSchedule(
    scheduleId: string,
    options: CallTarget = {},
  ): Promise<OperationStatus | null> {
    requireString("deleteSchedule", "scheduleId", scheduleId);
    requireCallOptions("deleteSchedule", "options", options);
    const req = { purgatory: this.name(options), scheduleId };
    const resp = await this.call("DeleteSchedule", req, this.deadlineMs);
    return resp.cancelled ? wire.statusFromWire(resp.cancelled) : null;
  }

  /** Every schedule of the purgatory, in schedule id order, with its next occurrence. */
  async listSchedules(options: CallTarget = {}): Promise<Schedule[]> {
    requireCallOptions("listSchedules", "options", options);
    const req = { purgatory: this.name(options) };
    const resp = await this.call("ListSchedules", req, this.deadlineMs);
    return resp.schedules.map(scheduleFromWire);
  }

  // ------------------------------------------------------------ worker groups (unary)
  /** End a delivery (or discard a dead letter). `attempt` 0: whatever delivery holds it;
   * else FailedPreconditionError if it was delivered again since. */
  async ack(
    group: string,
    sequence: number,
    options: CallTarget & { attempt?: number } = {},
  ): Promise<void> {
    requireString("ack", "group", group);
    requireInteger("ack", "sequence", sequence, 1);
    requireCallOptions("ack", "options", options, ["purgatory", "attempt"]);
    const req = { purgatory: this.name(options), group, sequence, attempt: options.attempt ?? 0 };
    await this.call("Ack", req, this.deadlineMs);
  }

  /** End a delivery unacked: offered again after `delayMs` (unset: the group's backoff,
   * or at once), or a dead letter now (`deadLetter`; also once out of attempts). A dead
   * letter stays one. Fenced by `attempt` like ack. */
  async nack(
    group: string,
    sequence: number,
    options: CallTarget & { attempt?: number; delayMs?: number; deadLetter?: boolean } = {},
  ): Promise<NackResult> {
    requireString("nack", "group", group);
    requireInteger("nack", "sequence", sequence, 1);
    const allowed = ["purgatory", "attempt", "delayMs", "deadLetter"];
    requireCallOptions("nack", "options", options, allowed);
    const req: Record<string, unknown> = {
      purgatory: this.name(options),
      group,
      sequence,
      attempt: options.attempt ?? 0,
      deadLetter: options.deadLetter ?? false,
    };
    if (options.delayMs !== undefined) req.delayMs = options.delayMs;
    const resp = await this.call("Nack", req, this.deadlineMs);
    return Object.freeze({ deadLetter: resp.deadLetter, redeliverAtMs: resp.redeliverAtMs });
  }

  /** Acks and nacks (AckEntry, or a bare sequence: an unfenced ack) in one request,
   * applied in order, each answered on its own (one AckResult per entry, in order): a
   * stale or unknown entry fails alone (its `code`), the others take effect. Sent on the
   * client's AckStream to the server (acks.ts), as AckBatch calls where it cannot be. */
  async ackBatch(
    group: string,
    entries: readonly (AckEntry | number)[],
    options: CallTarget = {},
  ): Promise<AckResult[]> {
    requireString("ackBatch", "group", group);
    if (!Array.isArray(entries)) requireStrings("ackBatch", "entries", entries);
    requireCallOptions("ackBatch", "options", options);
    const wireEntries = entries.map((e: AckEntry | number) => {
      const entry = typeof e === "number" ? { sequence: e } : e;
      const out: Record<string, unknown> = {
        sequence: entry.sequence,
        attempt: entry.attempt ?? 0,
        nack: entry.nack ?? false,
        deadLetter: entry.deadLetter ?? false,
      };
      if (entry.delayMs !== undefined) out.delayMs = entry.delayMs;
      return out;
    });
    const purgatory = this.name(options);
    const req = { purgatory, group, entries: wireEntries };
    const resp = await this.acks.send(this.stubFor(purgatory), req);
    return resp.results.map(ackResultFromWire);
  }

  /** Push a held lease's deadline to now + visibilityTimeoutMs (0: the group's); resolves
   * to the new deadline (epoch ms). FailedPreconditionError once the lease was lost. */
  async extendLease(
    group: string,
    sequence: number,
    attempt: number,
    options: CallTarget & { visibilityTimeoutMs?: number } = {},
  ): Promise<number> {
    requireString("extendLease", "group", group);
    requireInteger("extendLease", "sequence", sequence, 1);
    requireInteger("extendLease", "attempt", attempt, 1);
    requireCallOptions("extendLease", "options", options, ["purgatory", "visibilityTimeoutMs"]);
    const req = {
      purgatory: this.name(options),
      group,
      sequence,
      attempt,
      visibilityTimeoutMs: options.visibilityTimeoutMs ?? 0,
    };
    return (await this.call("ExtendLease", req, this.deadlineMs)).leaseDeadlineMs;
  }

  /** A group's dead letters, in sequence order, one page (`pageSize` 0: 100). */
  async listDeadLetters(
    group: string,
    options: CallTarget & { afterSequence?: number; pageSize?: number } = {},
  ): Promise<DeadLetterPage> {
    requireString("listDeadLetters", "group", group);
    const allowed = ["purgatory", "afterSequence", "pageSize"];
    requireCallOptions("listDeadLetters", "options", options, allowed);
    const req = {
      purgatory: this.name(options),
      group,
      afterSequence: options.afterSequence ?? 0,
      pageSize: options.pageSize ?? 0,
    };
    const resp = await this.call("ListDeadLetters", req, this.deadlineMs);
    return Object.freeze({
      deadLetters: Object.freeze(
        resp.deadLetters.map((m: wire.WireMessage) => deliveryFromWire(m, this)),
      ),
      nextAfterSequence: resp.nextAfterSequence,
    });
  }

  /** Dead letters back to the group with fresh attempts (none given: all of them);
   * resolves to the sequences redriven. */
  async redrive(
    group: string,
    sequences?: readonly number[],
    options: CallTarget = {},
  ): Promise<number[]> {
    requireString("redrive", "group", group);
    if (sequences !== undefined && !Array.isArray(sequences)) {
      requireStrings("redrive", "sequences", sequences); // not an array: says so
    }
    requireCallOptions("redrive", "options", options);
    const req = { purgatory: this.name(options), group, sequences: [...(sequences ?? [])] };
    return [...(await this.call("Redrive", req, this.deadlineMs)).redriven];
  }

  /** Dead letters dropped for good, never delivered again (none given: all of the
   * group's; an empty list is refused with InvalidArgumentError); resolves to the
   * sequences that were dead letters and are gone. */
  async discardDeadLetters(
    group: string,
    sequences?: readonly number[],
    options: CallTarget = {},
  ): Promise<number[]> {
    requireString("discardDeadLetters", "group", group);
    if (sequences !== undefined && !Array.isArray(sequences)) {
      requireStrings("discardDeadLetters", "sequences", sequences); // not an array: says so
    }
    requireCallOptions("discardDeadLetters", "options", options);
    const req = {
      purgatory: this.name(options),
      group,
      sequences: [...(sequences ?? [])],
      all: sequences === undefined,
    };
    return [...(await this.call("DiscardDeadLetters", req, this.deadlineMs)).discarded];
  }

  /** Every group of the purgatory with its counters. */
  async listGroups(options: CallTarget = {}): Promise<GroupInfo[]> {
    requireCallOptions("listGroups", "options", options);
    const resp = await this.call("ListGroups", { purgatory: this.name(options) }, this.deadlineMs);
    return resp.groups.map(groupFromWire);
  }

  /** Remove a group and everything it holds; resolves to the outcomes dropped with it. */
  async deleteGroup(group: string, options: CallTarget = {}): Promise<number> {
    requireString("deleteGroup", "group", group);
    requireCallOptions("deleteGroup", "options", options);
    const req = { purgatory: this.name(options), group };
    return (await this.call("DeleteGroup", req, this.deadlineMs)).dropped;
  }
}

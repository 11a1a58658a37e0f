/**
 * Run-time checks of the public methods' arguments. A JavaScript caller has no type
 * checker: a misplaced argument (`checkAndComplete(key, { purgatory })`, the options
 * object where the signal goes) must fail with a message naming the method and the
 * argument, not quietly do something else. Each check throws the InvalidArgumentError the
 * client raises for any request it refuses before sending (`invalidArgument`), so an
 * async method rejects with it.
 */
import { invalidArgument } from "./errors.js";

/** The fields of a `Signal`. */
export const SIGNAL_FIELDS = ["amount", "value", "source", "data", "attributes"] as const;

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? `the string ${JSON.stringify(value)}` : `a ${typeof value}`;
}

/** `value` is a string (non-empty unless `allowEmpty`). */
export function requireString(
  method: string,
  name: string,
  value: unknown,
  allowEmpty = false,
): asserts value is string {
  if (typeof value !== "string") {
    throw invalidArgument(name, `${method}: ${name} must be a string, got ${describe(value)}`);
  }
  if (!allowEmpty && value === "") {
    throw invalidArgument(name, `${method}: ${name} must not be empty`);
  }
}

/** `value` is undefined or a string. */
export function optionalString(method: string, name: string, value: unknown): void {
  if (value !== undefined) requireString(method, name, value, true);
}

/** `value` is an array of strings. */
export function requireStrings(
  method: string,
  name: string,
  value: unknown,
): asserts value is readonly string[] {
  if (!Array.isArray(value)) {
    throw invalidArgument(name, `${method}: ${name} must be an array, got ${describe(value)}`);
  }
  value.forEach((item, i) => requireString(method, `${name}[${i}]`, item, true));
}

/** `value` is an integer >= `minimum` (a safe integer: 64-bit fields are exact to 2^53). */
export function requireInteger(
  method: string,
  name: string,
  value: unknown,
  minimum = 0,
): asserts value is number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < minimum) {
    throw invalidArgument(
      name,
      `${method}: ${name} must be an integer >= ${minimum}, got ${describe(value)}` +
        (typeof value === "number" ? ` ${value}` : ""),
    );
  }
}

/** `value` is undefined or an integer >= `minimum`. */
export function optionalInteger(method: string, name: string, value: unknown, minimum = 0): void {
  if (value !== undefined) requireInteger(method, name, value, minimum);
}

/**
 * `value` is undefined or a plain object whose every key is in `allowed` (a typo or a
 * misplaced option is refused, naming what the argument takes).
 */
export function requireOptions(
  method: string,
  name: string,
  value: unknown,
  allowed: readonly string[],
): void {
  if (value === undefined) return;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalidArgument(name, `${method}: ${name} must be an object, got ${describe(value)}`);
  }
  const unknown = Object.keys(value).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    throw invalidArgument(
      name,
      `${method}: ${name} has no option ${unknown.map((k) => `'${k}'`).join(", ")} ` +
        `(it takes ${allowed.join(", ")})`,
    );
  }
}

/**
 * `value` is undefined or a `Signal`. An object with a `purgatory` is the options
 * argument put where the signal goes: the message says where it belongs.
 */
export function requireSignal(method: string, name: string, value: unknown, next: string): void {
  if (value !== null && typeof value === "object" && "purgatory" in value) {
    throw invalidArgument(
      name,
      `${method}: ${name} is a Signal { ${SIGNAL_FIELDS.join(", ")} }; ` +
        `the purgatory goes in the ${next} argument, { purgatory }`,
    );
  }
  requireOptions(method, name, value, SIGNAL_FIELDS);
  const signal = (value ?? {}) as Record<string, unknown>;
  for (const field of ["amount", "value"]) {
    const number = signal[field];
    if (number !== undefined && (typeof number !== "number" || !Number.isSafeInteger(number))) {
      throw invalidArgument(
        name,
        `${method}: ${name}.${field} must be an integer, got ${describe(number)}`,
      );
    }
  }
  optionalString(method, `${name}.source`, signal.source);
}

/** Options every call takes: the purgatory. */
export const TARGET_OPTIONS = ["purgatory"] as const;
/** `tryCompleteElseWatch`'s options (`wait` takes the same but `wait`). */
export const WATCH_OPTIONS = [
  "purgatory",
  "condition",
  "payload",
  "operationId",
  "wait",
  "dueTimeMs",
  "extendOnResend",
  "maxExtendMs",
  "deadlineMs",
  "signal",
] as const;

/** `requireOptions`, and its `purgatory` (if given) a non-empty string. */
export function requireCallOptions(
  method: string,
  name: string,
  value: unknown,
  allowed: readonly string[] = TARGET_OPTIONS,
): void {
  requireOptions(method, name, value, allowed);
  const purgatory = (value as { purgatory?: unknown } | undefined)?.purgatory;
  if (purgatory !== undefined) requireString(method, `${name}.purgatory`, purgatory);
}

/** A `PurgatoryConfig`'s fields. */
export const CONFIG_FIELDS = [
  "tickMs",
  "wheelSize",
  "purgeInterval",
  "maxPending",
  "retainedEvents",
  "durable",
] as const;

/**
 * The client's error tree, one class per gRPC status the service uses.
 *
 *     PurgatoryError                    any failed call (.code, .codeName, .details, .metadata)
 *     ├── InvalidArgumentError          INVALID_ARGUMENT   malformed request (names the field)
 *     ├── NotFoundError                 NOT_FOUND          unknown purgatory or operation
 *     ├── AlreadyExistsError            ALREADY_EXISTS     name or id taken (other definition)
 *     ├── ResourceExhaustedError        RESOURCE_EXHAUSTED a configured limit was hit
 *     │   └── SlowSubscriberError       ... a subscriber fell behind (.resumeAfter)
 *     ├── FailedPreconditionError       FAILED_PRECONDITION
 *     │   └── StreamResetError          ... the stream's incarnation changed (.incarnation)
 *     ├── OutOfRangeError               OUT_OF_RANGE       events no longer retained
 *     │                                                    (.oldestSequence)
 *     ├── UnavailableError              UNAVAILABLE        server down or shutting down
 *     ├── DeadlineExceededError         DEADLINE_EXCEEDED  the call's deadline passed
 *     ├── CancelledError                CANCELLED          the call was cancelled
 *     ├── UnauthenticatedError          UNAUTHENTICATED    token missing or invalid
 *     ├── PermissionDeniedError         PERMISSION_DENIED  token lacks the permission
 *     └── ServerError                   anything else (INTERNAL, UNKNOWN, ...)
 *
 * The client rejects only with these (never a raw grpc-js ServiceError), mirroring the
 * Python client's purgatory_client.errors. Each carries the server's google.rpc.Status
 * details decoded (details.ts): `fieldViolations`, `retryDelayMs`, `resourceInfo`.
 */
import { Metadata, status as Status } from "@grpc/grpc-js";

import { decodeDetails, NO_DETAILS, STATUS_DETAILS, type ErrorDetails } from "./details.js";

/** Trailing metadata of a slow-subscriber cut-off: the sequence to resume after. */
export const RESUME_AFTER = "purgatory-resume-after";
/** Trailing metadata of OUT_OF_RANGE: the oldest sequence still retained. */
export const OLDEST_SEQUENCE = "purgatory-oldest-sequence";
/** Header metadata of Subscribe, and trailing metadata of a reset: the stream's incarnation. */
export const INCARNATION = "purgatory-incarnation";

export class PurgatoryError extends Error {
  /** The numeric gRPC status code (grpc-js `status`). */
  readonly code: number;
  /** The status code's name, e.g. "NOT_FOUND". */
  readonly codeName: string;
  /** The server's message (for INVALID_ARGUMENT it names the field). */
  readonly details: string;
  /** Trailing metadata, text values only. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The decoded `google.rpc.Status` details (field violations, retry delay, resource). */
  readonly statusDetails: ErrorDetails;

  constructor(
    code: number,
    details: string,
    metadata: Record<string, string> = {},
    statusDetails: ErrorDetails = NO_DETAILS,
  ) {
    const codeName = Status[code] ?? String(code);
    super(`${codeName}: ${details}`);
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.metadata = Object.freeze({ ...metadata });
    this.statusDetails = statusDetails;
  }

  /** BadRequest: [field, description] pairs (INVALID_ARGUMENT). */
  get fieldViolations(): ReadonlyArray<readonly [string, string]> {
    return this.statusDetails.fieldViolations;
  }

  /** RetryInfo: the server's suggested back-off in ms (RESOURCE_EXHAUSTED, UNAVAILABLE). */
  get retryDelayMs(): number | undefined {
    return this.statusDetails.retryDelayMs;
  }

  /** ResourceInfo: what was not found (NOT_FOUND). */
  get resourceInfo(): { readonly type: string; readonly name: string } | undefined {
    return this.statusDetails.resourceInfo;
  }
}

export class InvalidArgumentError extends PurgatoryError {}
export class NotFoundError extends PurgatoryError {}
export class AlreadyExistsError extends PurgatoryError {}
export class ResourceExhaustedError extends PurgatoryError {}

/** The server ended a subscription that fell behind; resume after `resumeAfter`. */
export class SlowSubscriberError extends ResourceExhaustedError {
  get resumeAfter(): number {
    return Number(this.metadata[RESUME_AFTER]);
  }
}

export class FailedPreconditionError extends PurgatoryError {}

/**
 * A subscription cannot resume: the purgatory's event stream is a new incarnation (an
 * in-memory purgatory re-created, e.g. by a server restart), so sequence numbers start
 * again and "after N" no longer names the events the subscriber saw. `incarnation` is the
 * current one; subscribe afresh (without afterSequence), after reconciling state some other
 * way (GetOperation), since outcomes of the old incarnation may have been missed.
 */
export class StreamResetError extends FailedPreconditionError {
  get incarnation(): string {
    return this.metadata[INCARNATION] ?? "";
  }
}

export class OutOfRangeError extends PurgatoryError {
  get oldestSequence(): number | undefined {
    const raw = this.metadata[OLDEST_SEQUENCE];
    return raw === undefined ? undefined : Number(raw);
  }
}

export class UnavailableError extends PurgatoryError {}
export class DeadlineExceededError extends PurgatoryError {}
export class CancelledError extends PurgatoryError {}
export class UnauthenticatedError extends PurgatoryError {}
export class PermissionDeniedError extends PurgatoryError {}
export class ServerError extends PurgatoryError {}

type ErrorClass = new (
  code: number,
  details: string,
  metadata?: Record<string, string>,
  statusDetails?: ErrorDetails,
) => PurgatoryError;

const BY_CODE: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [Status.INVALID_ARGUMENT, InvalidArgumentError],
  [Status.NOT_FOUND, NotFoundError],
  [Status.ALREADY_EXISTS, AlreadyExistsError],
  [Status.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [Status.FAILED_PRECONDITION, FailedPreconditionError],
  [Status.OUT_OF_RANGE, OutOfRangeError],
  [Status.UNAVAILABLE, UnavailableError],
  [Status.DEADLINE_EXCEEDED, DeadlineExceededError],
  [Status.CANCELLED, CancelledError],
  [Status.UNAUTHENTICATED, UnauthenticatedError],
  [Status.PERMISSION_DENIED, PermissionDeniedError],
]);

function textMetadata(metadata: Metadata | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!metadata) return out;
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (!key.endsWith("-bin")) out[key] = typeof value === "string" ? value : value.toString();
  }
  return out;
}

interface GrpcErrorLike {
  code?: number;
  details?: string;
  message?: string;
  metadata?: Metadata;
}

/** The PurgatoryError for a failed grpc-js call (anything else is returned unchanged). */
export function fromGrpcError(err: unknown): unknown {
  if (err instanceof PurgatoryError) return err;
  const e = err as GrpcErrorLike;
  if (e === null || typeof e !== "object" || typeof e.code !== "number") return err;
  const metadata = textMetadata(e.metadata);
  let cls = BY_CODE.get(e.code) ?? ServerError;
  if (cls === ResourceExhaustedError && RESUME_AFTER in metadata) cls = SlowSubscriberError;
  if (cls === FailedPreconditionError && INCARNATION in metadata) cls = StreamResetError;
  const raw = e.metadata?.get(STATUS_DETAILS)[0];
  const statusDetails = decodeDetails(Buffer.isBuffer(raw) ? raw : undefined);
  return new cls(e.code, e.details ?? e.message ?? "", metadata, statusDetails);
}

/** The PurgatoryError for a status the server reported in a message (a Session frame's
 * acknowledgement carries a google.rpc.Code, not a call status). */
export function errorForCode(code: number, details: string): PurgatoryError {
  return fromGrpcError({ code, details }) as PurgatoryError;
}

/** A request the client refuses before sending it (INVALID_ARGUMENT naming the field),
 * the same error the server would answer with. */
export function invalidArgument(field: string, message: string): InvalidArgumentError {
  return new InvalidArgumentError(Status.INVALID_ARGUMENT, `${field}: ${message}`);
}

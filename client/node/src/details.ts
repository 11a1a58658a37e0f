/**
 * gRPC's richer error model: the server sends a `google.rpc.Status` in the
 * `grpc-status-details-bin` trailer, whose details say which fields were wrong
 * (BadRequest), when to retry (RetryInfo) and what was not found (ResourceInfo). Decoded
 * here with protobufjs from a hand-written description of those four messages (the wire
 * format of googleapis' google/rpc/status.proto and error_details.proto); details of other
 * types are kept as their type URL only.
 */
import protobuf from "protobufjs";

export const STATUS_DETAILS = "grpc-status-details-bin";

const root = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { typeUrl: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
            Duration: {
              fields: { seconds: { type: "int64", id: 1 }, nanos: { type: "int32", id: 2 } },
            },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 },
              },
            },
            BadRequest: {
              fields: { fieldViolations: { rule: "repeated", type: "FieldViolation", id: 1 } },
              nested: {
                FieldViolation: {
                  fields: {
                    field: { type: "string", id: 1 },
                    description: { type: "string", id: 2 },
                  },
                },
              },
            },
            RetryInfo: { fields: { retryDelay: { type: "google.protobuf.Duration", id: 1 } } },
            ResourceInfo: {
              fields: {
                resourceType: { type: "string", id: 1 },
                resourceName: { type: "string", id: 2 },
                owner: { type: "string", id: 3 },
                description: { type: "string", id: 4 },
              },
            },
          },
        },
      },
    },
  },
});

const Status = root.lookupType("google.rpc.Status");
const BadRequest = root.lookupType("google.rpc.BadRequest");
const RetryInfo = root.lookupType("google.rpc.RetryInfo");
const ResourceInfo = root.lookupType("google.rpc.ResourceInfo");
const PREFIX = "type.googleapis.com/";

/** What the client understood of an error's `google.rpc.Status` details. */
export interface ErrorDetails {
  /** BadRequest: [field, description] pairs (INVALID_ARGUMENT). */
  readonly fieldViolations: ReadonlyArray<readonly [string, string]>;
  /** RetryInfo: how long to wait before retrying, in ms (RESOURCE_EXHAUSTED, UNAVAILABLE). */
  readonly retryDelayMs: number | undefined;
  /** ResourceInfo: what was not found (NOT_FOUND). */
  readonly resourceInfo: { readonly type: string; readonly name: string } | undefined;
  /** The type URL of every detail, decoded or not. */
  readonly types: readonly string[];
}

export const NO_DETAILS: ErrorDetails = Object.freeze({
  fieldViolations: Object.freeze([]),
  retryDelayMs: undefined,
  resourceInfo: undefined,
  types: Object.freeze([]),
});

interface AnyLike {
  typeUrl: string;
  value: Uint8Array;
}

/** Decode the trailer's bytes; a malformed trailer gives NO_DETAILS, never an exception. */
export function decodeDetails(raw: Buffer | undefined): ErrorDetails {
  if (raw === undefined || raw.length === 0) return NO_DETAILS;
  let details: AnyLike[];
  try {
    details = (Status.toObject(Status.decode(raw), { defaults: true }) as { details: AnyLike[] })
      .details;
  } catch {
    return NO_DETAILS;
  }
  const fieldViolations: Array<readonly [string, string]> = [];
  let retryDelayMs: number | undefined;
  let resourceInfo: { type: string; name: string } | undefined;
  for (const any of details) {
    const type = any.typeUrl.startsWith(PREFIX) ? any.typeUrl.slice(PREFIX.length) : any.typeUrl;
    try {
      if (type === "google.rpc.BadRequest") {
        const m = BadRequest.toObject(BadRequest.decode(any.value), { defaults: true }) as {
          fieldViolations: Array<{ field: string; description: string }>;
        };
        for (const v of m.fieldViolations) fieldViolations.push([v.field, v.description]);
      } else if (type === "google.rpc.RetryInfo") {
        const m = RetryInfo.toObject(RetryInfo.decode(any.value), {
          defaults: true,
          longs: Number,
        }) as { retryDelay?: { seconds: number; nanos: number } };
        const d = m.retryDelay ?? { seconds: 0, nanos: 0 };
        retryDelayMs = d.seconds * 1000 + d.nanos / 1e6;
      } else if (type === "google.rpc.ResourceInfo") {
        const m = ResourceInfo.toObject(ResourceInfo.decode(any.value), { defaults: true }) as {
          resourceType: string;
          resourceName: string;
        };
        resourceInfo = { type: m.resourceType, name: m.resourceName };
      }
    } catch {
      // One malformed detail does not hide the others.
    }
  }
  return Object.freeze({
    fieldViolations: Object.freeze(fieldViolations),
    retryDelayMs,
    resourceInfo,
    types: Object.freeze(details.map((d) => d.typeUrl)),
  });
}

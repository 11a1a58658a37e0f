/**
 * Node.js client of the Purgatory gRPC service (purgatory.v1.PurgatoryService).
 *
 * `PurgatoryClient` has the Python client's methods in camelCase; results are frozen
 * plain objects (models.ts); every failure is a `PurgatoryError` subclass (errors.ts).
 */
export {
  DEFAULT_PURGATORY,
  PurgatoryClient,
  START_AFTER,
  type CallTarget,
  type ClientOptions,
  type SubscribeOptions,
  type WatchOptions,
} from "./client.js";
export type { TlsOptions } from "./connection.js";
export type { ErrorDetails } from "./details.js";
export * from "./errors.js";
export {
  Condition,
  OperationState,
  isFinal,
  type BatchSignalResult,
  type Event,
  type ForceCompleteResult,
  type OperationResult,
  type OperationSpec,
  type OperationStatus,
  type PurgatoryConfig,
  type PurgatoryInfo,
  type RetryPolicy,
  type Signal,
} from "./models.js";
export { MAX_HOPS, OWNER } from "./routing.js";

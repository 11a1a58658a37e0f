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
  type DispatcherOptions,
  type SubscribeOptions,
  type WatchOptions,
} from "./client.js";
export type { CancelOptions, ListFilter, RescheduleOptions } from "./methods.js";
export {
  AcceptorCore,
  DEFAULT_DISPATCHER_CONFIG,
  MAX_DELAY_MS,
  ProcessingResult,
  TaskExpiredError,
  TaskHolder,
  TaskOverflowError,
  TrafficShaper,
  classify,
  type BatchOutcome,
  type DispatcherConfig,
  type DispatcherCounters,
} from "./batcher.js";
export {
  BatchingDispatcher,
  SessionTransport,
  type BatchTransport,
  type Task,
  type TaskOptions,
} from "./dispatcher.js";
export type { TlsOptions } from "./connection.js";
export type { ErrorDetails } from "./details.js";
export * from "./errors.js";
export {
  GroupStream,
  type AckEntry,
  type AckResult,
  type DeadLetterPage,
  type Delivery,
  type GroupInfo,
  type GroupPriority,
  type GroupRateLimit,
  type GroupSelection,
  type JoinOptions,
  type KeySource,
  type NackResult,
  type RetryBackoff,
} from "./groups.js";
export {
  Condition,
  OperationState,
  isFinal,
  type BatchSignalResult,
  type Event,
  type Expressions,
  type ForceCompleteResult,
  type JsonValue,
  type OperationPage,
  type OperationResult,
  type OperationSpec,
  type OperationStatus,
  type PurgatoryConfig,
  type PurgatoryInfo,
  type RetryPolicy,
  type Signal,
} from "./models.js";
export { MAX_HOPS, OWNER } from "./routing.js";
export type { Schedule, ScheduleOptions, ScheduleUpsert } from "./schedules.js";
export {
  Session,
  type SessionAck,
  type SessionFrame,
  type SessionLiveness,
  type SessionOptions,
  type SignalEntry,
} from "./session.js";
export { DEFAULT_FRAME_SIZE } from "./watch.js";

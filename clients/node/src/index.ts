export { Queue, run, mpop, mpopMany } from "./queue";
export type { Delivery } from "./queue";
export type { RedisClient } from "./send";
export { Worker, defaultLogger, errorText, workerName } from "./worker";
export type { Handler, Logger, WorkerOptions } from "./worker";
export { FetchStrategy } from "./strategy";
export { Durability } from "./durability";
export type { WaitOptions } from "./durability";
export { blockingConnection, commandConnection, isBlockingConnection } from "./connection";
export { orcaKey, configOrcaKey, encodeConfig, encodeResult } from "./keys";
export type { Config } from "./keys";
export { Job, jobsFromReply } from "./types";
export type {
  AutoDelay,
  LeaseInfo,
  NackOutcome,
  QueueSettings,
  QueueStats,
  SettingsChange,
  TickReport,
  WaitStats,
} from "./types";
export type { Filter, ListOptions, ListState, MackItem, MackReply, PopOptions } from "./protocol";
export { MAX_ERROR_CHARS, errorArg } from "./protocol";
export { Notifier, CallbackFailed, retryAfterMs, callbackRequest } from "./notifier";
export { Forward } from "./handoff";
export type { NotifierOptions } from "./notifier";
export {
  JobFailed,
  OrcaError,
  LeaseLostError,
  JobCancelledError,
  QueueFullError,
  BadConfigError,
  NoSuchJobError,
  JobStateError,
  JobNotQueuedError,
  WrongTypeError,
  InvariantError,
  InvalidArgumentError,
  ResultTooLargeError,
  NotReplicatedError,
  mapError,
} from "./errors";
export type { NotQueuedState } from "./errors";

export { Queue, run } from "./queue";
export type { Delivery } from "./queue";
export type { RedisClient } from "./send";
export { Worker, defaultLogger } from "./worker";
export type { Handler, Logger, WorkerOptions } from "./worker";
export { FetchStrategy } from "./strategy";
export { blockingConnection, commandConnection } from "./connection";
export { orcaKey, configOrcaKey, encodeConfig, encodeResult } from "./keys";
export type { Config } from "./keys";
export { Job, jobsFromReply } from "./types";
export type { LeaseInfo, NackOutcome, QueueSettings, QueueStats, TickReport, WaitStats } from "./types";
export {
  OrcaError,
  LeaseLostError,
  JobCancelledError,
  QueueFullError,
  BadConfigError,
  NoSuchJobError,
  JobStateError,
  WrongTypeError,
  InvariantError,
  InvalidArgumentError,
  mapError,
} from "./errors";

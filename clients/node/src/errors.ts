/**
 * Error classes for the server's error replies (docs/commands.md). `message` is the server's
 * text without the `ERR` prefix; `reply` keeps the full reply text.
 */
export class OrcaError extends Error {
  readonly reply: string;
  constructor(message: string, reply?: string) {
    super(message);
    this.name = new.target.name;
    this.reply = reply ?? message;
  }
}

/** The lease is not held (expired and handed out again, or already acked/nacked). */
export class LeaseLostError extends OrcaError {}
/** The job was deleted while it ran: its lease is cancelled. */
export class JobCancelledError extends LeaseLostError {}
/** The queue holds orca.max-queue-length waiting jobs (or a key's 2^30 - 1). */
export class QueueFullError extends OrcaError {}
/** The job config was refused (not a JSON object, no key, bad priority, collation or gate, too large). */
export class BadConfigError extends OrcaError {}
/** No job under that orca key. */
export class NoSuchJobError extends OrcaError {}
/** Not allowed in the job's state (moving an immediate job, requeueing a queued key). */
export class JobStateError extends OrcaError {}

const NOT_QUEUED: ReadonlyArray<readonly [string, NotQueuedState]> = [
  ["job is running", "leased"],
  ["job is waiting to be retried", "delayed"],
  ["job is a dead letter", "dead"],
  ["job is held behind gate", "held"],
];
export type NotQueuedState = "leased" | "delayed" | "dead" | "held";

/**
 * ORCA.MOVE of a job that exists but is not in the queue order: `state` says where it is
 * (`leased`: running; `delayed`: waiting for its retry at `retryAt`; `dead`: a dead letter;
 * `held`: behind the closed gate `gate`), undefined if the server did not say.
 */
export class JobNotQueuedError extends JobStateError {
  readonly state: NotQueuedState | undefined;
  readonly gate: string | undefined;
  readonly retryAt: number | undefined;
  constructor(message: string, reply?: string) {
    super(message, reply);
    this.state = NOT_QUEUED.find(([prefix]) => message.startsWith(prefix))?.[1];
    this.gate = /^job is held behind gate '([\s\S]*)' \(ORCA\.GATE/.exec(message)?.[1];
    const retry = /^job is waiting to be retried \(at (\d+)\)/.exec(message)?.[1];
    this.retryAt = retry === undefined ? undefined : Number(retry);
  }
}
/** The key holds another Redis type. */
export class WrongTypeError extends OrcaError {}
/** ORCA.CHECK found a broken invariant. */
export class InvariantError extends OrcaError {}
/** An option or argument was refused. */
export class InvalidArgumentError extends OrcaError {}
/**
 * ORCA.ACK refused its RESULT: over `orca.max-payload-bytes`. Nothing changed (the lease is
 * still held); a worker NACKs the delivery as failed with this error.
 */
export class ResultTooLargeError extends InvalidArgumentError {}

const BY_PREFIX: ReadonlyArray<readonly [string, new (m: string, r?: string) => OrcaError]> = [
  ["lease not held", LeaseLostError],
  ["job was cancelled", JobCancelledError],
  ["queue is full", QueueFullError],
  ["import would exceed", QueueFullError],
  ["no such job", NoSuchJobError],
  ["immediate jobs cannot be moved", JobStateError],
  ["job is already queued", JobStateError],
  ...NOT_QUEUED.map(([prefix]) => [prefix, JobNotQueuedError] as const),
  ["job is not in the queue order", JobNotQueuedError],
  ["WRONGTYPE", WrongTypeError],
  ["queue invariant broken", InvariantError],
  ["config ", BadConfigError],
  ["invalid config JSON", BadConfigError],
  ["priority ", BadConfigError],
  ["collation ", BadConfigError],
  ["'gate' must be", BadConfigError],
  ["gate must not be empty", BadConfigError],
  ["gate is ", BadConfigError],
  ["result is ", ResultTooLargeError],
  ["internal error in the orca module", OrcaError],
];

/** Replies that are not the module's own (left as ioredis raised them). */
const FOREIGN = ["unknown command", "wrong number of arguments"];
const FOREIGN_CODES = [
  "OOM",
  "READONLY",
  "NOPERM",
  "NOAUTH",
  "LOADING",
  "MOVED",
  "ASK",
  "BUSY",
  "CLUSTERDOWN",
  "CROSSSLOT",
];

/** The Orca error for an ioredis ReplyError, or the error itself when it is not one. */
export function mapError(err: unknown): unknown {
  if (!(err instanceof Error) || err instanceof OrcaError || err.name !== "ReplyError") return err;
  const reply = err.message;
  const code = reply.split(" ", 1)[0] ?? "";
  if (FOREIGN_CODES.includes(code)) return err;
  const text = code === "ERR" ? reply.slice(4) : reply;
  for (const [prefix, cls] of BY_PREFIX) if (text.startsWith(prefix)) return new cls(text, reply);
  if (FOREIGN.some((p) => text.startsWith(p))) return err;
  return new InvalidArgumentError(text, reply);
}

/**
 * A durable write (a Queue with `waitReplicas` / `waitAof`) was applied by the master, but fewer
 * replicas than asked confirmed it (`WAIT` / `WAITAOF`) within `waitTimeoutMs`. The write is not
 * undone: it holds on the master and may still reach the replicas, or be lost if the master
 * fails first. `value` is what the write resolved to; `replicas` how many confirmed; `wanted`
 * how many were asked for; `local` whether the master's own AOF fsync was confirmed (WAITAOF;
 * undefined for WAIT).
 */
export class NotReplicatedError extends Error {
  constructor(
    message: string,
    readonly value: unknown,
    readonly replicas: number,
    readonly wanted: number,
    readonly local: boolean | undefined,
  ) {
    super(message);
    this.name = "NotReplicatedError";
  }
}

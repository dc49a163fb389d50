/**
 * Error classes for the server's error replies (docs/commands.md). Every reply starts with a
 * code ("Error codes"): the class is chosen by that code alone, never by the text. `code` is
 * the code, `message` the text after the code and its fields, `reply` the full reply text.
 */
/**
 * Throw it (or a subclass) from a worker's handler for an expected failure: the delivery is NACKed
 * as for any error. `delayMs` says when to retry (the NACK's `DELAY`: a receiver's `Retry-After`),
 * instead of the worker's `nackDelayMs` or the server's backoff. Not a server error.
 */
export class JobFailed extends Error {
  readonly delayMs: number | undefined;
  constructor(message: string, options: { delayMs?: number } = {}) {
    super(message);
    this.name = "JobFailed";
    const d = options.delayMs;
    if (d !== undefined && !Number.isSafeInteger(d)) throw new RangeError("delayMs must be an integer (ms)");
    this.delayMs = d === undefined ? undefined : Math.max(0, d);
  }
}

export class OrcaError extends Error {
  readonly reply: string;
  readonly code: string;
  constructor(message: string, reply?: string, code = "ERR") {
    super(message);
    this.name = new.target.name;
    this.reply = reply ?? message;
    this.code = code;
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

/** The code of each state a job can be in outside the queue order. */
const NOT_QUEUED: Readonly<Record<string, NotQueuedState>> = {
  LEASED: "leased",
  DELAYED: "delayed",
  DEAD: "dead",
  HELD: "held",
};
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
  constructor(message: string, reply?: string, code = "NOTQUEUED", fields: readonly string[] = []) {
    super(message, reply, code);
    this.state = NOT_QUEUED[code];
    const field = fields[0];
    this.gate = code === "HELD" && field !== undefined ? decodeField(field) : undefined;
    this.retryAt =
      code === "DELAYED" && field !== undefined && /^\d+$/.test(field) ? Number(field) : undefined;
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

type ErrorClass = new (
  message: string,
  reply?: string,
  code?: string,
  fields?: readonly string[],
) => OrcaError;

/**
 * The class of each code of docs/commands.md's table. ERR (a malformed command) and any code
 * added later give InvalidArgumentError.
 */
const BY_CODE: Readonly<Record<string, ErrorClass>> = {
  WRONGTYPE: WrongTypeError,
  BADCONFIG: BadConfigError,
  NOJOB: NoSuchJobError,
  IMMEDIATE: JobStateError,
  LEASED: JobNotQueuedError,
  DELAYED: JobNotQueuedError,
  DEAD: JobNotQueuedError,
  HELD: JobNotQueuedError,
  NOTQUEUED: JobNotQueuedError,
  ALREADYQUEUED: JobStateError,
  NOLEASE: LeaseLostError,
  CANCELLED: JobCancelledError,
  QUEUEFULL: QueueFullError,
  TOOLARGE: ResultTooLargeError,
  TOOMANY: InvalidArgumentError,
  TIMERANGE: InvalidArgumentError,
  CORRUPT: InvalidArgumentError,
  INVARIANT: InvariantError,
  INTERNAL: OrcaError,
};

/** How many fixed fields follow a code: DELAYED <retry_at>, HELD <gate>, TOOMANY <max>. */
const FIELDS: Readonly<Record<string, number>> = { DELAYED: 1, HELD: 1, TOOMANY: 1 };

/** Redis's own refusals of a command (left as ioredis raised them). */
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
  "TRYAGAIN",
  "MASTERDOWN",
  "EXECABORT",
  "NOSCRIPT",
];

/** A field the server percent-encoded (a gate name); as it is if it does not decode. */
function decodeField(f: string): string {
  try {
    return decodeURIComponent(f);
  } catch {
    return f;
  }
}

/** The code, fields and text of an error reply. */
export function splitReply(reply: string): { code: string; fields: string[]; text: string } {
  const space = reply.indexOf(" ");
  const code = space < 0 ? reply : reply.slice(0, space);
  const rest = space < 0 ? "" : reply.slice(space + 1);
  const n = FIELDS[code] ?? 0;
  const fields: string[] = [];
  let text = rest;
  for (let i = 0; i < n; i++) {
    const at = text.indexOf(" ");
    fields.push(at < 0 ? text : text.slice(0, at));
    text = at < 0 ? "" : text.slice(at + 1);
  }
  return { code, fields, text };
}

/** The Orca error for an ioredis ReplyError, or the error itself when it is not one. */
export function mapError(err: unknown): unknown {
  if (!(err instanceof Error) || err instanceof OrcaError || err.name !== "ReplyError") return err;
  const reply = err.message;
  const { code, fields, text } = splitReply(reply);
  if (FOREIGN_CODES.includes(code)) return err;
  if (code === "ERR" && FOREIGN.some((p) => text.startsWith(p))) return err;
  const cls = BY_CODE[code] ?? InvalidArgumentError;
  return new cls(text, reply, code, fields);
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

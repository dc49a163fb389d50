/**
 * The ORCA.* commands as data: the arguments and how to read the reply. Used by Queue and
 * by the worker's strategy, so every command is spelled out once. No I/O here.
 */
import { mapError } from "./errors";
import { Config, encodeConfig } from "./keys";
import {
  Job,
  jobsFromReply,
  NackOutcome,
  nackFromReply,
  popFromBuffers,
  popFromValues,
  QueueSettings,
  QueueStats,
  SettingsChange,
  settingsFromReply,
  statsFromReply,
  TickReport,
  tickFromReply,
} from "./types";

export type Arg = string | number | Buffer;

export interface Command<T> {
  args: Arg[];
  parse: (reply: unknown) => T;
  /** Read bulk strings as Buffers (ORCA.RESULT). */
  buffers?: boolean;
  /**
   * The same command without `FORMAT VALUES`, for a server older than this client (it refuses
   * the option, changing nothing): `send` falls back to it, and keeps doing so on that client.
   */
  legacy?: Command<T>;
}

/**
 * `cmd` (a command that hands out jobs, its reply read as maps) asking for `FORMAT VALUES`
 * instead: half the items per job for ioredis to parse and no field names to tell apart, on
 * the worker's hot path. `parse` reads the values; `cmd` stays as the fallback.
 */
function asValues<T>(cmd: Command<T>, parse: (reply: unknown) => T): Command<T> {
  return { args: [...cmd.args, "FORMAT", "VALUES"], parse, buffers: true, legacy: cmd };
}
const values = (q: string | undefined) => (r: unknown) => popFromValues(r, q, q === undefined);

function opt(args: Arg[], name: string, value: Arg | undefined): Arg[] {
  if (value !== undefined) args.push(name, value);
  return args;
}

const job = (r: unknown) => Job.fromReply(r);

export const enqueue = (q: string, config: Config, now?: number): Command<Job> => ({
  args: opt(["ORCA.ENQUEUE", q, encodeConfig(config)], "NOW", now),
  parse: job,
});
export const immediate = (q: string, config: Config, now?: number): Command<Job> => ({
  args: opt(["ORCA.IMMEDIATE", q, encodeConfig(config)], "NOW", now),
  parse: job,
});
export const reenqueue = (q: string, config: Config, createdAt: number): Command<Job> => ({
  args: ["ORCA.REENQUEUE", q, encodeConfig(config), createdAt],
  parse: job,
});

export type MoveTo = "RELEASE" | "DELAY";
export function move(
  q: string,
  key: string,
  where: MoveTo,
  opts: { now?: number; bufferMs?: number } = {},
): Command<Job> {
  const to = where.toUpperCase();
  if (to !== "RELEASE" && to !== "DELAY") throw new TypeError("move must be RELEASE or DELAY");
  return { args: opt(opt(["ORCA.MOVE", q, key, to], "NOW", opts.now), "BUFFER", opts.bufferMs), parse: job };
}
export const del = (q: string, key: string): Command<boolean> => ({
  args: ["ORCA.DELETE", q, key],
  parse: (r) => Number(r) === 1,
});
export const status = (q: string, key: string): Command<Job | null> => ({
  args: ["ORCA.STATUS", q, key],
  parse: (r) => (r === null ? null : Job.fromReply(r)),
});

export type Filter = Record<string, string> | [string, string];
export type ListState = "queued" | "held" | "leased" | "delayed" | "dead";
const LIST_STATES: readonly string[] = ["queued", "held", "leased", "delayed", "dead"];
export interface ListOptions {
  filter?: Filter;
  /** List the jobs in this state instead of the queued ones. */
  state?: ListState;
  /** With `state: "held"`: the held jobs of one gate. */
  gate?: string;
}
export function listPage(q: string, offset: number, limit: number, o: ListOptions = {}): Command<Job[]> {
  const args: Arg[] = ["ORCA.LIST", q];
  if (o.state !== undefined) {
    if (!LIST_STATES.includes(o.state)) throw new TypeError(`state must be one of ${LIST_STATES.join(", ")}`);
    args.push("STATE", o.state.toUpperCase());
  }
  if (o.gate !== undefined) args.push("GATE", o.gate);
  args.push("OFFSET", offset, "LIMIT", limit);
  const filter = o.filter;
  if (filter !== undefined) {
    const pairs = Array.isArray(filter) ? [filter] : Object.entries(filter);
    if (pairs.length !== 1) throw new TypeError("ORCA.LIST filters on exactly one metadata field");
    const [field, value] = pairs[0] as [string, string];
    args.push("FILTER", field, value);
  }
  return { args, parse: (r) => jobsFromReply(r) };
}
export const stats = (q: string): Command<QueueStats> => ({ args: ["ORCA.STATS", q], parse: statsFromReply });
export const len = (q: string): Command<number> => ({ args: ["ORCA.LEN", q], parse: Number });
export const check = (q: string): Command<void> => ({ args: ["ORCA.CHECK", q], parse: () => undefined });
export const deadList = (q: string, offset: number, limit: number): Command<Job[]> => ({
  args: ["ORCA.DEAD", q, "LIST", "OFFSET", offset, "LIMIT", limit],
  parse: (r) => jobsFromReply(r),
});
export const deadRequeue = (q: string, key: string): Command<Job> => ({
  args: ["ORCA.DEAD", q, "REQUEUE", key],
  parse: job,
});
export const deadPurge = (q: string): Command<number> => ({ args: ["ORCA.DEAD", q, "PURGE"], parse: Number });
export const result = (q: string, key: string): Command<Buffer | null> => ({
  args: ["ORCA.RESULT", q, key],
  parse: (r) => (r === null ? null : (r as Buffer)),
  buffers: true,
});
export function settings(q: string, c: SettingsChange = {}): Command<QueueSettings> {
  const args = opt(opt(["ORCA.SETTINGS", q], "ORDER", c.order?.toUpperCase()), "LIFETIME", c.lifetimeMs);
  if (c.autodelay !== undefined) {
    args.push("AUTODELAY", c.autodelay.windowMs, c.autodelay.stepMs);
    if (c.autodelay.capMs) args.push("CAP", c.autodelay.capMs);
  }
  opt(opt(opt(args, "MAXRUNNING", c.maxRunning), "DEADMAX", c.deadMax), "DEADTTL", c.deadTtlMs);
  return { args: opt(args, "RESULTMAX", c.resultMax), parse: (r) => settingsFromReply(r) };
}

export const gateClose = (q: string, gate: string): Command<boolean> => ({
  args: ["ORCA.GATE", q, gate, "CLOSE"],
  parse: (r) => Number(r) === 1,
});
export const gateOpen = (q: string, gate: string): Command<number> => ({
  args: ["ORCA.GATE", q, gate, "OPEN"],
  parse: Number,
});
/** The configs of the dropped jobs, parsed, in arrival order. */
export const gateDrop = (q: string, gate: string): Command<Record<string, unknown>[]> => ({
  args: ["ORCA.GATE", q, gate, "DROP"],
  parse: (r) => ((r as unknown[] | null) ?? []).map((c) => JSON.parse(String(c)) as Record<string, unknown>),
});
export const tick = (q: string): Command<TickReport> => ({ args: ["ORCA.TICK", q], parse: tickFromReply });

export interface PopOptions {
  leaseMs?: number;
  blockMs?: number;
  /** Who takes the job (`WORKER`): kept with the lease, shown by STATUS, LIST and the dashboard. */
  worker?: string;
}
function popArgs(q: string, o: PopOptions, count?: number): Arg[] {
  const args = opt(opt(opt(["ORCA.POP", q], "LEASE", o.leaseMs), "BLOCK", o.blockMs), "COUNT", count);
  return opt(args, "WORKER", o.worker);
}
/** `NEXT [LEASE ms] [WORKER name]` after the arguments of an ACK, NACK or MACK. */
function nextArgs(args: Arg[], leaseMs?: number, worker?: string): Arg[] {
  args.push("NEXT");
  return opt(opt(args, "LEASE", leaseMs), "WORKER", worker);
}
/** The longest failure text sent with `ORCA.NACK ... ERROR` (characters; the server keeps at most its own bound). */
export const MAX_ERROR_CHARS = 4096;
/** A failure text as sent: at most `MAX_ERROR_CHARS` characters. */
export function errorArg(error: string | undefined): string | undefined {
  if (error === undefined) return undefined;
  const chars = Array.from(error);
  return chars.length <= MAX_ERROR_CHARS ? error : chars.slice(0, MAX_ERROR_CHARS - 1).join("") + "\u2026";
}
/** A delivering command's reply parsers: one job (or nil), or a list of jobs (nil: empty). */
function one(read: (r: unknown) => Job) {
  return (r: unknown): Job | null => (r === null ? null : read(r));
}
function many(read: (r: unknown) => Job) {
  return (r: unknown): Job[] => (r === null ? [] : (r as unknown[]).map(read));
}
const maps = (q?: string) => (r: unknown) => popFromBuffers(r, q);

export const pop = (q: string, o: PopOptions = {}): Command<Job | null> =>
  asValues({ args: popArgs(q, o), parse: one(maps(q)), buffers: true }, one(values(q)));
export const popMany = (q: string, count: number, o: PopOptions = {}): Command<Job[]> =>
  asValues({ args: popArgs(q, o, count), parse: many(maps(q)), buffers: true }, many(values(q)));
function mpopArgs(queues: string[], o: PopOptions, count?: number): Arg[] {
  if (queues.length === 0) throw new RangeError("ORCA.MPOP needs at least one queue");
  return opt(
    opt(
      opt(opt(["ORCA.MPOP", queues.length, ...queues], "LEASE", o.leaseMs), "BLOCK", o.blockMs),
      "COUNT",
      count,
    ),
    "WORKER",
    o.worker,
  );
}
/** ORCA.MPOP: the job names its queue (`Job.queue`). */
export const mpop = (queues: string[], o: PopOptions = {}): Command<Job | null> =>
  asValues({ args: mpopArgs(queues, o), parse: one(maps()), buffers: true }, one(values(undefined)));
export const mpopMany = (queues: string[], count: number, o: PopOptions = {}): Command<Job[]> =>
  asValues({ args: mpopArgs(queues, o, count), parse: many(maps()), buffers: true }, many(values(undefined)));

const ackArgs = (q: string, key: string, lease: string, res?: Buffer | string, ttlMs?: number): Arg[] =>
  opt(opt(["ORCA.ACK", q, key, lease], "RESULT", res), "TTL", ttlMs);
export const ack = (
  q: string,
  key: string,
  lease: string,
  res?: Buffer | string,
  ttlMs?: number,
): Command<void> => ({
  args: ackArgs(q, key, lease, res, ttlMs),
  parse: () => undefined,
});
/** Where a hand-off sends its successor: `FORWARD <queue> <config>`. */
export interface Forward {
  queue: string;
  config: Config;
}
/**
 * ORCA.ACK ... FORWARD <queue2> <config>: acks and enqueues the successor in one atomic step;
 * resolves to the successor's write reply.
 */
export const ackForward = (
  q: string,
  key: string,
  lease: string,
  forward: Forward,
  res?: Buffer | string,
  ttlMs?: number,
): Command<Job> => ({
  args: [...ackArgs(q, key, lease, res, ttlMs), "FORWARD", forward.queue, encodeConfig(forward.config)],
  parse: (r) => job((r as unknown[])[1]),
});
/**
 * ORCA.NACK ... FORWARD <queue2> <config>: fails the delivery and, if this makes it a dead letter,
 * enqueues the successor in the same step (`successor` in the outcome).
 */
export const nackForward = (
  q: string,
  key: string,
  lease: string,
  forward: Forward,
  delayMs?: number,
  error?: string,
): Command<NackOutcome> => ({
  args: [...nackArgs(q, key, lease, delayMs, error), "FORWARD", forward.queue, encodeConfig(forward.config)],
  parse: (r) => {
    const [outcome, successor] = r as [Parameters<typeof nackFromReply>[0], unknown];
    const o = nackFromReply(outcome);
    if (successor !== null && successor !== undefined) o.successor = job(successor);
    return o;
  },
});
/** ORCA.ACK ... NEXT [LEASE ms] [WORKER name]: the next job of the same queue, leased, or null. */
export const ackNext = (
  q: string,
  key: string,
  lease: string,
  o: { result?: Buffer | string; ttlMs?: number; leaseMs?: number; worker?: string } = {},
): Command<Job | null> =>
  asValues(
    {
      args: nextArgs(ackArgs(q, key, lease, o.result, o.ttlMs), o.leaseMs, o.worker),
      parse: one(maps(q)),
      buffers: true,
    },
    one(values(q)),
  );
/** One delivery of an ORCA.MACK: its orca key, its lease token and, optionally, its result. */
export interface MackItem {
  key: string;
  lease: string;
  result?: Buffer | string;
}
/**
 * What ORCA.MACK did: per delivery, in order, `null` if acked or the error ORCA.ACK would have
 * rejected with (LeaseLostError, JobCancelledError); with `next`, the jobs it leased.
 */
export interface MackReply {
  outcomes: (Error | null)[];
  jobs: Job[];
}
function outcomesOf(r: unknown): (Error | null)[] {
  if (!Array.isArray(r)) throw new TypeError("ORCA.MACK replied without its outcomes");
  return r.map((o) => (o instanceof Error ? (mapError(o) as Error) : null));
}
/**
 * ORCA.MACK: acks several deliveries of one queue in one command, each with its own outcome; with
 * `next`, leases up to `next.count` jobs (default one per delivery) in the same atomic step.
 * Results go all or none (the server takes one per delivery): mixing deliveries with and without
 * a result is a TypeError (Queue.ackMany splits them).
 */
export function mack(
  q: string,
  items: MackItem[],
  o: { ttlMs?: number; next?: { leaseMs?: number; count?: number; worker?: string } } = {},
): Command<MackReply> {
  if (items.length === 0) throw new RangeError("ORCA.MACK needs at least one delivery");
  const withResult = items.filter((i) => i.result !== undefined).length;
  if (withResult !== 0 && withResult !== items.length)
    throw new TypeError("ORCA.MACK takes a result for every delivery or for none");
  const args: Arg[] = ["ORCA.MACK", q, items.length];
  for (const i of items) args.push(i.key, i.lease);
  if (withResult > 0) args.push("RESULTS", ...items.map((i) => i.result as Buffer | string));
  opt(args, "TTL", o.ttlMs);
  const next = o.next;
  if (next === undefined) return { args, parse: (r) => ({ outcomes: outcomesOf(r), jobs: [] }) };
  args.push("NEXT");
  opt(opt(opt(args, "LEASE", next.leaseMs), "COUNT", next.count), "WORKER", next.worker);
  const reply = (read: (r: unknown) => Job) => (r: unknown) => {
    const [outcomes, jobs] = r as [unknown, unknown];
    if (!Array.isArray(jobs)) throw new TypeError("ORCA.MACK ... NEXT replied without its jobs");
    return { outcomes: outcomesOf(outcomes), jobs: jobs.map(read) };
  };
  return asValues({ args, parse: reply(maps(q)), buffers: true }, reply(values(q)));
}
const nackArgs = (q: string, key: string, lease: string, delayMs?: number, error?: string): Arg[] =>
  opt(opt(["ORCA.NACK", q, key, lease], "DELAY", delayMs), "ERROR", errorArg(error));
/**
 * ORCA.NACK [DELAY ms] [ERROR text]: `error` (why it failed) is kept with the attempt, the delayed
 * job and the dead letter; STATUS and the dashboard show it.
 */
export const nack = (
  q: string,
  key: string,
  lease: string,
  delayMs?: number,
  error?: string,
): Command<NackOutcome> => ({
  args: nackArgs(q, key, lease, delayMs, error),
  parse: nackFromReply,
});
/**
 * ORCA.NACK ... NEXT [LEASE ms] [WORKER name]: the next job, or null. The server's reply is then
 * the next job only: what became of the failed one (retry, dead, superseded) is not returned.
 */
export const nackNext = (
  q: string,
  key: string,
  lease: string,
  o: { delayMs?: number; leaseMs?: number; error?: string; worker?: string } = {},
): Command<Job | null> =>
  asValues(
    {
      args: nextArgs(nackArgs(q, key, lease, o.delayMs, o.error), o.leaseMs, o.worker),
      parse: one(maps(q)),
      buffers: true,
    },
    one(values(q)),
  );
export const extend = (q: string, key: string, lease: string, ms: number): Command<number> => ({
  args: ["ORCA.EXTEND", q, key, lease, ms],
  parse: Number,
});

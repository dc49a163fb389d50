/** The Worker's options, its logger and the checks of its numbers. */
import type { Job } from "./types";

export type Handler = (job: Job) => unknown;

export interface Logger {
  debug(message: string, ...args: unknown[]): void;
  info(message: string, ...args: unknown[]): void;
  warn(message: string, ...args: unknown[]): void;
  error(message: string, ...args: unknown[]): void;
}

/** Warnings and errors to the console; debug and info dropped. */
export const defaultLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (m, ...a) => console.warn(`[orca-queue] ${m}`, ...a),
  error: (m, ...a) => console.error(`[orca-queue] ${m}`, ...a),
};

export interface WorkerOptions {
  /** Jobs handled at once (default 1). */
  concurrency?: number;
  /** Lease of each delivery (default 300000 ms); heartbeats extend it. */
  leaseMs?: number;
  /** How long one blocking pop waits (default 5000 ms). */
  blockMs?: number;
  /** At close, how long running handlers may take before their jobs are handed back (default 30000 ms). */
  graceMs?: number;
  /** Heartbeat period (default a third of the lease). */
  heartbeatMs?: number;
  /**
   * A slot that finishes a job on its own takes its next one in the same round trip
   * (`ORCA.ACK ... NEXT`; slots finishing together share one pop). Default true; false: plain
   * ACKs, free slots are refilled by batched pops.
   */
  ackNext?: boolean;
  /** TTL of ACK results (default: the server's orca.result-ttl). */
  resultTtlMs?: number;
  /** NACK delay (default: the server's exponential backoff). */
  nackDelayMs?: number;
  /**
   * Close on SIGTERM/SIGINT (a second signal skips the grace). Default true. The worker never
   * exits the process: it ends once running handlers have settled (honour `job.signal`).
   */
  handleSignals?: boolean;
  /** Start at once (default true); otherwise call `run()`. */
  autorun?: boolean;
  /**
   * This worker's name: it takes jobs as `host:pid:name` (`host:pid` without one), sent as
   * `WORKER` on every pop and NEXT, so STATUS, LIST and the dashboard show who runs each job.
   */
  name?: string;
  logger?: Logger;
}

/** Throws a RangeError unless `value` is a safe integer >= `low`. */
export function integer(name: string, value: unknown, low: number, why = ""): void {
  if (!(Number.isSafeInteger(value) && (value as number) >= low))
    throw new RangeError(`${name} must be an integer >= ${low}${why}`);
}

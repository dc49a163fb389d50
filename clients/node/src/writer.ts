/**
 * The worker's writes on its command connection: with durable writes each is followed by its
 * WAIT (a short one logged and counted, not thrown: the write stands on the master); jobs a
 * blocking pop brought are confirmed before they run; a finish that failed on a connection
 * error is re-sent while its lease may still be held.
 */

import { isWrite, type Durability } from "./durability";
import { LeaseLostError, OrcaError } from "./errors";
import type * as P from "./protocol";
import { send as run, type RedisClient } from "./send";
import type { FetchStrategy } from "./strategy";
import type { Job } from "./types";
import type { Logger } from "./worker";

/** A finish is re-sent until this long before its lease would end. */
const RETRY_MARGIN_MS = 250;

/** Errors that are answers or bugs, never a lost connection. */
const NOT_CONNECTION = new Set([
  "ReplyError",
  "NotReplicatedError",
  "TypeError",
  "RangeError",
  "SyntaxError",
]);

/**
 * A connection lost or closed (the command may or may not have run: ioredis's "Connection is
 * closed.", MaxRetriesPerRequestError, a refused connect), not an error reply or a bug.
 */
export function isConnectionError(e: unknown): boolean {
  return e instanceof Error && !(e instanceof OrcaError) && !NOT_CONNECTION.has(e.name);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class WorkerWriter {
  /** Finished jobs: until when (Date.now()) their lease may still be held. */
  readonly leaseEnds = new WeakMap<Job, number>();

  constructor(
    private readonly conn: RedisClient,
    private readonly durability: Durability,
    private readonly strategy: FetchStrategy,
    private readonly log: Logger,
    private readonly counts: { unconfirmed?: number },
  ) {}

  /** One command on the worker's connection; with durable writes, followed by its WAIT. */
  exec<T>(cmd: P.Command<T>): Promise<T> {
    if (!this.durability.on || !isWrite(cmd.args)) return run(this.conn, cmd);
    return this.durability.send(this.conn, cmd).then(([value, reply]) => {
      this.waited(reply, cmd);
      return value;
    });
  }

  /** A short WAIT is logged (with the job's key) and counted, not thrown: the write stands. */
  private waited(reply: unknown, cmd: P.Command<unknown>): void {
    const short = this.durability.shortfall(reply);
    if (short === undefined) return;
    this.counts.unconfirmed = (this.counts.unconfirmed ?? 0) + 1;
    const [name, , key] = cmd.args;
    const of = /^ORCA\.(ACK|NACK|EXTEND)$/i.test(String(name)) ? ` of ${String(key)}` : "";
    this.log.warn(`${String(name)}${of} not confirmed within ${this.durability.timeoutMs} ms (${short[0]})`);
  }

  /**
   * Jobs a blocking pop brought, once replicas have their leases: a WAIT on the blocking
   * connection need not cover a pop served while it was blocked, so an EXTEND of each lease on
   * the worker's connection, with its WAIT, does (replication keeps the server's order).
   */
  async confirm(jobs: Job[]): Promise<Job[]> {
    if (jobs.length === 0 || !this.durability.on) return jobs;
    const kept: Job[] = [];
    await Promise.all(
      jobs.map((job) =>
        this.exec(this.strategy.extend(job)).then(
          () => void kept.push(job),
          (e: unknown) => {
            if (e instanceof LeaseLostError) this.log.warn(`job ${job.key}: lease lost before it started`);
            else kept.push(job);
          },
        ),
      ),
    );
    return jobs.filter((j) => kept.includes(j));
  }

  /**
   * A finish (ACK, NACK, MACK): re-sent after a connection error (ioredis gave up on it) while
   * the job's lease may still be held, so a blip (a failover, a restart) does not drop finished
   * work. Its answer is final: a lease the server says is lost is never acked again.
   */
  async resending<T>(jobs: Job[], what: string, make: () => Promise<T>): Promise<T> {
    let pause = 50;
    for (;;) {
      try {
        return await make();
      } catch (e) {
        const until = Math.min(...jobs.map((j) => this.leaseEnds.get(j) ?? 0)) - RETRY_MARGIN_MS;
        if (!isConnectionError(e) || Date.now() + pause >= until) throw e;
        this.log.warn(
          `${what} of ${jobs.map((j) => j.key).join(", ")} failed on a connection error (${String(e)}); ` +
            `retrying in ${pause} ms while the lease may be held`,
        );
        await sleep(pause);
        pause = Math.min(pause * 2, 1000);
      }
    }
  }

  /** Gives jobs back at shutdown (REENQUEUE then NACK each), in one write; failures logged. */
  async handBack(jobs: Job[]): Promise<void> {
    const cmds: P.Command<unknown>[] = jobs.flatMap((j) => this.strategy.handBack(j));
    // Issued in one turn on one connection (per node, on a Cluster): one write, in order.
    const replies = await Promise.allSettled(cmds.map((c) => run(this.conn, c)));
    const lost = replies.find((r) => r.status === "rejected" && !(r.reason instanceof OrcaError));
    if (lost?.status === "rejected")
      this.log.error(
        `could not hand back ${jobs.length} jobs (${String(lost.reason)}): their leases will expire and they come back`,
      );
    replies.forEach((r, i) => {
      if (r.status === "rejected" && r.reason instanceof OrcaError)
        this.log.warn(`${String(cmds[i]!.args[0])} ${String(cmds[i]!.args[1])}: ${String(r.reason)}`);
    });
  }
}

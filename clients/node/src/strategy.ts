/**
 * How a worker takes and finishes jobs: the one place that decides which commands do it, so
 * a new way of fetching (a combined ack-and-next, a multi-queue pop) changes this file alone.
 *
 * Today: a non-blocking `ORCA.POP ... COUNT n` per queue (first queue first) on the worker's
 * pipelining connection, so the acks of finished jobs and the pop for the freed slots leave
 * in one write; when every queue is empty, one `ORCA.POP ... BLOCK` on the blocking
 * connection (rotating over queues with a short BLOCK, `pollMs`, when there are several).
 * Finishing is ACK / NACK; heartbeats EXTEND; a job handed back at shutdown is
 * `ORCA.REENQUEUE <q> <config> <created_at>` (immediate at its original arrival, seed 000's
 * shutdown rule) then `ORCA.NACK` of the old lease, which the server reports `superseded`.
 */
import * as P from "./protocol";
import type { Job, NackOutcome } from "./types";

/** The server's default orca.max-pop-count: one pop never asks for more. */
export const MAX_POP_COUNT = 1000;

export interface StrategyOptions {
  leaseMs: number;
  blockMs: number;
  pollMs: number;
  resultTtlMs?: number;
  nackDelayMs?: number;
}

function q(job: Job): string {
  if (job.queue === undefined) throw new TypeError("job does not name its queue");
  return job.queue;
}
function lease(job: Job): string {
  if (job.lease === undefined) throw new TypeError("job has no lease");
  return job.lease;
}

export class FetchStrategy {
  readonly blockMs: number;
  private turn = 0;

  constructor(
    readonly queues: string[],
    readonly opts: StrategyOptions,
  ) {
    if (queues.length === 0) throw new RangeError("a worker needs at least one queue");
    if (!(opts.leaseMs > 0)) throw new RangeError("leaseMs must be > 0 (a worker always leases)");
    if (!(opts.blockMs > 0)) throw new RangeError("blockMs must be > 0 (the worker must notice a stop)");
    this.blockMs = queues.length === 1 ? opts.blockMs : Math.min(opts.blockMs, opts.pollMs);
  }

  /** Non-blocking pop of up to `want` jobs from `queue`. */
  quick(queue: string, want: number): P.Command<Job[]> {
    return P.popMany(queue, Math.min(want, MAX_POP_COUNT), { leaseMs: this.opts.leaseMs });
  }

  /** The blocking pop to issue when every queue was empty. */
  blocking(want: number): P.Command<Job[]> {
    const queue = this.queues[this.turn++ % this.queues.length]!;
    return P.popMany(queue, Math.min(want, MAX_POP_COUNT), {
      leaseMs: this.opts.leaseMs,
      blockMs: this.blockMs,
    });
  }

  ack(job: Job, result: Buffer | string | undefined): P.Command<void> {
    return P.ack(
      q(job),
      job.key,
      lease(job),
      result,
      result === undefined ? undefined : this.opts.resultTtlMs,
    );
  }

  nack(job: Job): P.Command<NackOutcome> {
    return P.nack(q(job), job.key, lease(job), this.opts.nackDelayMs);
  }

  extend(job: Job): P.Command<number> {
    return P.extend(q(job), job.key, lease(job), this.opts.leaseMs);
  }

  /** Commands (to pipeline, in order) that give a running job back at shutdown. */
  handBack(job: Job): P.Command<unknown>[] {
    if (job.payload === undefined) throw new TypeError("a popped job always has its payload");
    return [P.reenqueue(q(job), job.payload, job.createdAt), P.nack(q(job), job.key, lease(job), 0)];
  }
}

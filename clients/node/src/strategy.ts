/**
 * How a worker takes and finishes jobs: the one place that decides which commands do it.
 *
 * Fetching: a non-blocking `ORCA.POP ... COUNT n` (one queue) or `ORCA.MPOP ... COUNT n`
 * (several: the first queue in argument order that has jobs) on the worker's pipelining
 * connection; when nothing can be handed out, one `ORCA.POP`/`ORCA.MPOP ... BLOCK` on the
 * blocking connection (MPOP waits on every queue and is woken by any).
 *
 * Finishing: a slot that finishes alone acks with `ORCA.ACK ... NEXT`, which brings the slot's
 * next job in the same round trip, when the job came from the first queue (NEXT takes the next
 * job of the job's own queue: for the first queue that is what MPOP would take too). Slots of
 * the first queue that finish in the same turn share one `ORCA.MACK ... NEXT COUNT n`: one
 * command acks them all and brings their next jobs. Jobs of other queues finishing in the same
 * turn share one `ORCA.MACK` per queue (without NEXT), and a pop refills their slots (the
 * Worker decides, see `flushFinishing`); with `ackNext: false`, plain ACKs. A failure is a
 * plain `ORCA.NACK` (its reply, the outcome, goes to the `failed` event; `NACK ... NEXT` would
 * not return it). Heartbeats are EXTEND; a job handed back at shutdown is
 * `ORCA.REENQUEUE <q> <config> <created_at>` (immediate at its original arrival, the design's
 * shutdown rule) then `ORCA.NACK` of the old lease, which the server reports `superseded`.
 */
import * as P from "./protocol";
import type { Job, NackOutcome } from "./types";

/** The server's default orca.max-pop-count: one pop never asks for more. */
export const MAX_POP_COUNT = 1000;

export interface StrategyOptions {
  leaseMs: number;
  blockMs: number;
  resultTtlMs?: number;
  nackDelayMs?: number;
  /** Finish with ACK ... NEXT where it takes what a pop would (default true). */
  ackNext?: boolean;
  /** `WORKER <name>` on every pop and NEXT: the lease shows who runs the job. */
  worker?: string;
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
  readonly several: boolean;

  constructor(
    readonly queues: string[],
    readonly opts: StrategyOptions,
  ) {
    if (queues.length === 0) throw new RangeError("a worker needs at least one queue");
    if (!(opts.leaseMs > 0)) throw new RangeError("leaseMs must be > 0 (a worker always leases)");
    if (!(opts.blockMs > 0)) throw new RangeError("blockMs must be > 0 (the worker must notice a stop)");
    this.blockMs = opts.blockMs;
    this.several = queues.length > 1;
  }

  /**
   * The queues grouped by hash slot (in the order their first queue is given), one strategy
   * each with the same options: on a Cluster one MPOP takes keys of one slot. Queues sharing a
   * hash tag (`{course}:a`, `{course}:b`) share a group.
   */
  bySlot(slotOf: (key: string) => number): FetchStrategy[] {
    const groups = new Map<number, string[]>();
    for (const name of this.queues) {
      const slot = slotOf(name);
      const g = groups.get(slot);
      if (g) g.push(name);
      else groups.set(slot, [name]);
    }
    return [...groups.values()].map((names) => new FetchStrategy(names, this.opts));
  }

  /** Non-blocking pop of up to `want` jobs (from the first queue that has any). */
  quick(want: number): P.Command<Job[]> {
    const n = Math.min(want, MAX_POP_COUNT);
    const o = { leaseMs: this.opts.leaseMs, worker: this.opts.worker };
    return this.several ? P.mpopMany(this.queues, n, o) : P.popMany(this.queues[0]!, n, o);
  }

  /** The blocking pop to issue when nothing could be handed out (on every queue). */
  blocking(want: number): P.Command<Job[]> {
    const n = Math.min(want, MAX_POP_COUNT);
    const o = { leaseMs: this.opts.leaseMs, blockMs: this.blockMs, worker: this.opts.worker };
    return this.several ? P.mpopMany(this.queues, n, o) : P.popMany(this.queues[0]!, n, o);
  }

  /** Whether ACK ... NEXT gives this job's slot the job a pop would (first queue only). */
  chains(job: Job): boolean {
    return (this.opts.ackNext ?? true) && job.queue === this.queues[0];
  }

  /** ORCA.ACK ... NEXT LEASE: the slot's next job comes back with the ACK. */
  ackNext(job: Job, result: Buffer | string | undefined): P.Command<Job | null> {
    return P.ackNext(q(job), job.key, lease(job), {
      result,
      ttlMs: result === undefined ? undefined : this.opts.resultTtlMs,
      leaseMs: this.opts.leaseMs,
      worker: this.opts.worker,
    });
  }

  /** Whether finished jobs are acked in batches (ORCA.MACK): with `ackNext` (the default). */
  get batches(): boolean {
    return this.opts.ackNext ?? true;
  }

  /** ORCA.MACK of finished jobs of one queue (all with a result or none), without NEXT. */
  ackMany(done: { job: Job; result: Buffer | string | undefined }[]): P.Command<P.MackReply> {
    const withResult = done.some((d) => d.result !== undefined);
    return P.mack(
      q(done[0]!.job),
      done.map((d) => ({ key: d.job.key, lease: lease(d.job), result: d.result })),
      { ttlMs: withResult ? this.opts.resultTtlMs : undefined },
    );
  }

  /**
   * ORCA.MACK ... NEXT LEASE COUNT n: the finished jobs of the first queue (all with a result or
   * none), acked in one command that brings up to `count` next jobs.
   */
  ackManyNext(
    done: { job: Job; result: Buffer | string | undefined }[],
    count: number,
  ): P.Command<P.MackReply> {
    const withResult = done.some((d) => d.result !== undefined);
    return P.mack(
      q(done[0]!.job),
      done.map((d) => ({ key: d.job.key, lease: lease(d.job), result: d.result })),
      {
        ttlMs: withResult ? this.opts.resultTtlMs : undefined,
        next: { leaseMs: this.opts.leaseMs, count: Math.min(count, MAX_POP_COUNT), worker: this.opts.worker },
      },
    );
  }

  /** ORCA.ACK ... FORWARD: the hand-off (the successor's reply is not needed). */
  ackForward(job: Job, to: P.Forward, result: Buffer | string | undefined): P.Command<void> {
    const c = P.ackForward(
      q(job),
      job.key,
      lease(job),
      to,
      result,
      result === undefined ? undefined : this.opts.resultTtlMs,
    );
    return { args: c.args, parse: () => undefined };
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

  /** `delayMs`: a failure's own retry delay (`JobFailed`), else `nackDelayMs`; `error`: the failure's text. */
  nack(job: Job, delayMs?: number, error?: string): P.Command<NackOutcome> {
    return P.nack(q(job), job.key, lease(job), delayMs ?? this.opts.nackDelayMs, error);
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

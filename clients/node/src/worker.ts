/**
 * The worker runtime: `new Worker(queue, handler, { concurrency, leaseMs })` takes jobs, runs
 * `handler(job)` for up to `concurrency` at once, acks each with its resolved value as the
 * result (a slot that finishes alone takes its next job in the same round trip: `ORCA.ACK ... NEXT`),
 * nacks on a rejection, keeps leases alive with heartbeats, and on `close()` or SIGTERM/SIGINT
 * stops taking jobs, lets running ones finish within `graceMs` and hands the rest back. Several
 * queues are served in the order given, with `ORCA.MPOP`. Events: `completed` (job, result),
 * `failed` (job, error, outcome), `lost` (job, reason), `error` (error; only emitted when someone
 * listens), `closed`.
 */
import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import type Redis from "ioredis";

import { blockingConnection, commandConnection } from "./connection";
import type { Durability } from "./durability";
import calculateSlot from "cluster-key-slot";
import { JobFailed, LeaseLostError, JobCancelledError, OrcaError, ResultTooLargeError } from "./errors";
import { encodeResult } from "./keys";
import { Forward } from "./handoff";
import type * as P from "./protocol";
import { Queue, run } from "./queue";
import { FetchStrategy } from "./strategy";
import { WorkerWriter } from "./writer";
import { ClusterBlockers } from "./shards";
import { isCluster, type RedisClient } from "./send";
import type { Job, NackOutcome } from "./types";

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

/** `host:pid`, or `host:pid:name`: how a Worker names itself on its pops. */
export function workerName(name?: string): string {
  const base = `${hostname()}:${process.pid}`;
  return name ? `${base}:${name}` : base;
}

/** `Name: message` of a handler's rejection (what the NACK's ERROR and the log carry). */
export function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

interface Finishing {
  job: Job;
  value: unknown;
  result: Buffer | string | undefined;
}

interface Running {
  job: Job;
  lastBeat: number;
  finished: boolean;
}

function integer(name: string, value: unknown, low: number, why = ""): void {
  if (!(Number.isSafeInteger(value) && (value as number) >= low))
    throw new RangeError(`${name} must be an integer >= ${low}${why}`);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class Worker extends EventEmitter {
  readonly queues: Queue[];
  readonly strategy: FetchStrategy;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly graceMs: number;
  readonly heartbeatMs: number;
  readonly counts: {
    completed: number;
    failed: number;
    lost: number;
    handedBack: number;
    unconfirmed?: number;
  } = { completed: 0, failed: 0, lost: 0, handedBack: 0 };
  /** How the worker's writes wait for replicas: its first Queue's (see `durability.ts`). */
  readonly durability: Durability;
  private readonly writer: WorkerWriter;
  /** Who takes the jobs (`WORKER` on every pop): `host:pid[:name]`. */
  readonly name: string;
  private readonly log: Logger;
  private readonly conn: RedisClient;
  private readonly blocker: Redis | undefined; // one server (Sentinel too): the blocking connection
  private readonly shards: ClusterBlockers | undefined; // a Cluster: one per slot group
  private readonly groups: FetchStrategy[]; // the queues by hash slot (one group off a Cluster)
  private blockerId: Promise<number> | undefined; // CLIENT ID of the blocking connection
  private readonly running = new Set<Running>();
  private pending = 0; // acks, nacks and hand-backs in flight
  private settledAll: (() => void) | undefined;
  private readonly batch: number;
  private reserved = 0; // slots claimed by pops in flight
  private inFlight = 0; // non-blocking pops in flight
  private blocking = false; // a blocking pop in flight
  private pumpScheduled = false;
  private dispatchedThisTurn = false;
  private finishing: Finishing[] = [];
  private acking: Finishing[] = []; // finished jobs of other queues, acked in one MACK per queue
  private noMack = false; // the server has no ORCA.MACK: plain ACKs
  private flushTimer: NodeJS.Immediate | undefined; // the finishes of this loop iteration, flushed in its check phase
  private drained = false; // a pop came back short: block instead of polling
  private pausedUntil = 0;
  private backoff = 100;
  private backoffTimer: NodeJS.Timeout | undefined;
  private wakeClose: (() => void) | undefined;
  private fetchBack: (() => void) | undefined; // close() waits for the pops in flight
  private started = false;
  private stopping = false;
  private hurry: (() => void) | undefined;
  private hurried = false;
  private closing: Promise<void> | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private readonly onSignal: (() => void) | undefined;

  constructor(
    queueOrQueues: Queue | Queue[],
    readonly handler: Handler,
    opts: WorkerOptions = {},
  ) {
    super();
    this.queues = Array.isArray(queueOrQueues) ? queueOrQueues : [queueOrQueues];
    const first = this.queues[0];
    if (!first) throw new RangeError("a worker needs at least one queue");
    if (this.queues.some((q) => q.client !== first.client)) {
      throw new RangeError("every queue of a worker must use the same Redis client");
    }
    if (new Set(this.queues.map((q) => q.name)).size !== this.queues.length)
      throw new RangeError("a queue is named twice");
    if (!("duplicate" in first.client))
      throw new TypeError("a Worker needs an ioredis Redis or Cluster client");
    this.concurrency = opts.concurrency ?? 1;
    this.leaseMs = opts.leaseMs ?? 300_000;
    this.graceMs = opts.graceMs ?? 30_000;
    // The same rules (and words) as the Python client's. What the server gets (LEASE, BLOCK,
    // TTL, DELAY) must be integers; grace and heartbeat periods are local times.
    integer("concurrency", this.concurrency, 1);
    integer("leaseMs", this.leaseMs, 1000, " (heartbeats run at about a third of it)");
    integer("blockMs", opts.blockMs ?? 5000, 1, " (the worker must notice a stop)");
    this.heartbeatMs = opts.heartbeatMs ?? Math.floor(this.leaseMs / 3);
    if (!(this.heartbeatMs > 0 && this.heartbeatMs < this.leaseMs))
      throw new RangeError("heartbeatMs must be between 0 and leaseMs");
    if (!(this.graceMs >= 0)) throw new RangeError("graceMs must be >= 0");
    if (this.graceMs > 2 ** 31 - 1)
      throw new RangeError("graceMs must be at most 2147483647 (a longer Node timer fires at once)");
    if (opts.resultTtlMs !== undefined) integer("resultTtlMs", opts.resultTtlMs, 0);
    if (opts.nackDelayMs !== undefined) integer("nackDelayMs", opts.nackDelayMs, 0);
    this.batch = Math.ceil(this.concurrency / 2);
    this.name = workerName(opts.name);
    this.strategy = new FetchStrategy(
      this.queues.map((q) => q.name),
      {
        leaseMs: this.leaseMs,
        blockMs: opts.blockMs ?? 5000,
        resultTtlMs: opts.resultTtlMs,
        nackDelayMs: opts.nackDelayMs,
        ackNext: opts.ackNext,
        worker: this.name,
      },
    );
    this.log = opts.logger ?? defaultLogger;
    this.durability = first.durability;
    if (this.durability.on) this.counts.unconfirmed = 0;
    const client = first.client;
    this.conn = commandConnection(client);
    this.writer = new WorkerWriter(this.conn, this.durability, this.strategy, this.log, this.counts);
    this.conn.on("error", (e: Error) => this.log.warn(`worker connection: ${e.message}`));
    if (isCluster(client)) {
      // One MPOP takes keys of one slot: pops go group by group; blocking ones in shards.ts.
      this.groups = this.strategy.bySlot(calculateSlot);
      this.shards = new ClusterBlockers(client, this.groups, this.log);
    } else {
      this.groups = [this.strategy];
      const blocker = (this.blocker = blockingConnection(client));
      blocker.on("error", (e: Error) => this.log.warn(`worker blocking connection: ${e.message}`));
      // A reconnected blocking connection has another CLIENT ID: forget the old one when the
      // connection goes (not when one becomes ready: the first CLIENT ID may be asked, and
      // answered, before the first "ready" event, and forgetting it then left close() unable
      // to wake the blocking pop). A CLIENT ID asked after the loss runs on the next connection.
      blocker.on("close", () => (this.blockerId = undefined));
    }
    if (opts.handleSignals ?? true) {
      this.onSignal = () => {
        if (this.closing) {
          this.hurried = true;
          this.hurry?.();
        } else void this.close();
      };
      process.on("SIGTERM", this.onSignal);
      process.on("SIGINT", this.onSignal);
    }
    if (opts.autorun ?? true) this.run();
  }

  /** Starts taking jobs (once; the constructor does it unless `autorun: false`). */
  run(): void {
    if (this.started) return;
    if (this.closing) throw new Error("worker is closed");
    this.started = true;
    const tick = Math.max(50, Math.min(this.heartbeatMs / 4, 1000));
    this.beatTimer = setInterval(() => this.beat(), tick);
    this.beatTimer.unref();
    this.pump();
    this.log.info(
      `worker started: queues ${this.strategy.queues.join(", ")}, concurrency ${this.concurrency}`,
    );
  }

  /** Jobs being handled now. */
  get active(): number {
    return this.running.size;
  }

  // -- fetching ---------------------------------------------------------------------------
  // Event-driven: `pump()` runs at start and whenever slots free up. It keeps up to two
  // non-blocking pops in flight, each for at most half the slots, so one batch of jobs is
  // handled while the pop for the next is on the wire (never more jobs leased than
  // `concurrency`: a slot whose ACK ... NEXT is in flight stays reserved). A pop that finds
  // nothing switches to one blocking pop on the blocking connection; nothing else is fetched
  // until it returns. Once busy, slots refill themselves with ACK ... NEXT and pops are rare.
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // After the handlers settling in this turn have freed their slots, before the corked
    // socket is flushed (send.ts): the pop for the freed slots leaves with their acks.
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    if (this.drained) {
      // The queue was found empty: one blocking pop, once the non-blocking ones are back.
      if (!this.stopping && !this.blocking && this.inFlight === 0 && this.pausedUntil === 0) this.block();
      return;
    }
    while (!this.stopping && !this.blocking && this.pausedUntil === 0) {
      const avail = this.concurrency - this.running.size - this.reserved;
      if (avail <= 0 || this.inFlight >= 2 || (this.inFlight > 0 && avail < this.batch)) return;
      const n = Math.min(avail, this.batch);
      this.reserved += n;
      this.inFlight++;
      this.quick(n).then(
        (jobs) => this.received(n, jobs, false),
        (e: unknown) => this.fetchFailed(n, e, false),
      );
    }
  }

  private async quick(n: number): Promise<Job[]> {
    const jobs: Job[] = [];
    for (const group of this.groups) {
      while (jobs.length < n) {
        const got = await this.writer.exec(group.quick(n - jobs.length));
        jobs.push(...got);
        // A short pop of one queue means it is empty; MPOP takes from one queue at a time, so a
        // short MPOP that brought jobs may leave some in the next queues.
        if (got.length === 0 || !group.several) break;
      }
    }
    return jobs;
  }

  private block(): void {
    const avail = this.concurrency - this.running.size - this.reserved;
    if (avail <= 0 || this.stopping) return;
    this.blocking = true;
    this.reserved += avail;
    const pop = async () => {
      if (this.shards) {
        const jobs = await this.shards.pop(avail);
        this.track(
          this.handBack(jobs.slice(avail), "brought by pops on several shards at once, handed back"),
        );
        return this.writer.confirm(jobs.slice(0, avail));
      }
      const blocker = this.blocker!;
      this.blockerId ??= blocker.call("CLIENT", "ID").then(Number);
      await this.blockerId;
      return this.writer.confirm(await run(blocker, this.strategy.blocking(avail)));
    };
    pop().then(
      (jobs) => this.received(avail, jobs, true),
      (e: unknown) => this.fetchFailed(avail, e, true),
    );
  }

  private received(n: number, jobs: Job[], wasBlocking: boolean): void {
    // Replies of both pops often arrive in one read: handle the second one in a later turn,
    // so the first batch's acks and next pop leave (and the server works on them) while
    // this process handles the second batch.
    if (this.dispatchedThisTurn && jobs.length > 0 && !this.stopping) {
      // The first batch's acks and pop leave on process.nextTick (send.ts), before this.
      setImmediate(() => this.dispatch(n, jobs, wasBlocking));
      return;
    }
    this.dispatch(n, jobs, wasBlocking);
  }

  private dispatch(n: number, jobs: Job[], wasBlocking: boolean): void {
    this.reserved -= n;
    if (wasBlocking) this.blocking = false;
    else this.inFlight--;
    this.fetchBack?.();
    this.backoff = 100;
    if (this.stopping) {
      this.track(this.handBack(jobs, "popped while stopping, handed back"));
      return;
    }
    if (jobs.length > 0) this.markDispatched();
    // Fewer jobs than asked: the queue is empty now. Stop polling it; block instead.
    this.drained = wasBlocking ? false : this.drained || jobs.length < n;
    for (const job of jobs) this.start(job);
    this.pump();
  }

  private fetchFailed(n: number, e: unknown, wasBlocking: boolean): void {
    this.reserved -= n;
    if (wasBlocking) {
      this.blocking = false;
      this.blockerId = undefined;
    } else this.inFlight--;
    this.fetchBack?.();
    if (this.stopping) return;
    this.log.warn(`fetching jobs failed (${String(e)}); retrying in ${this.backoff} ms`);
    this.emitError(e);
    this.pausedUntil = Date.now() + this.backoff;
    this.backoffTimer = setTimeout(() => {
      this.pausedUntil = 0;
      this.pump();
    }, this.backoff);
    this.backoff = Math.min(this.backoff * 2, 5000);
  }

  // -- handling ---------------------------------------------------------------------------
  private start(job: Job): void {
    const r: Running = { job, lastBeat: Date.now(), finished: false };
    this.running.add(r);
    let p: Promise<unknown>;
    try {
      p = Promise.resolve(this.handler(job));
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(
      (value) => this.finish(r, value, undefined, false),
      (error: unknown) => this.finish(r, undefined, error, true),
    );
  }

  private finish(r: Running, value: unknown, error: unknown, failed: boolean): void {
    const { job } = r;
    if (r.finished) {
      this.log.info(`job ${job.key}: result dropped (${job.abandoned})`);
      return;
    }
    r.finished = true;
    this.running.delete(r);
    this.writer.leaseEnds.set(job, r.lastBeat + this.leaseMs);
    this.wakeClose?.();
    if (job.abandoned !== undefined) {
      this.schedulePump();
      this.log.info(`job ${job.key}: result dropped (${job.abandoned})`);
      return;
    }
    let result: Buffer | string | undefined;
    if (!failed) {
      try {
        result = encodeResult(value instanceof Forward ? value.result : value);
      } catch (e) {
        [failed, error] = [true, e];
      }
    }
    if (!failed && value instanceof Forward) {
      // A hand-off: its own command, neither chained nor batched.
      this.schedulePump();
      this.track(this.handOff(job, value, result));
      return;
    }
    if (!failed && !this.stopping && this.strategy.chains(job)) {
      this.reserved++; // the slot stays taken until flushFinishing() decides how it refills
      this.finishing.push({ job, value, result });
      // Flushed once this event-loop iteration's callbacks have run (its timers, the I/O of its
      // poll phase and their promise reactions): handlers settling anywhere in the iteration
      // share one command, not only those settling in the same microtask flush.
      this.flushTimer ??= setImmediate(() => this.flushFinishing());
      return;
    }
    this.schedulePump();
    if (!failed && !this.stopping && this.strategy.batches && !this.noMack) {
      // Another queue's job: acked with the others of this turn, one MACK per queue.
      this.acking.push({ job, value, result });
      this.flushTimer ??= setImmediate(() => this.flushFinishing());
      return;
    }
    this.track(this.settle(job, value, result, error, failed));
  }

  /**
   * The successful finishes of this turn (jobs of the first queue): a slot that finishes alone
   * takes its next job with `ACK ... NEXT`; slots that finish together share one
   * `ORCA.MACK ... NEXT COUNT n` (one command acks them all and brings their next jobs; with
   * and without results, two). At a stop, plain ACKs.
   */
  private flushFinishing(): void {
    if (this.flushTimer !== undefined) clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    const done = this.finishing;
    this.finishing = [];
    this.flushAcks();
    if (this.stopping || (this.noMack && done.length > 1)) {
      if (!this.stopping) this.schedulePump();
      this.reserved -= done.length;
      for (const { job, value, result } of done)
        this.track(this.settle(job, value, result, undefined, false));
      return;
    }
    if (done.length === 1) {
      const { job, value, result } = done[0]!;
      this.track(this.ackThenNext(job, value, result));
      return;
    }
    // Batches of at most half the slots: when both replies arrive in one read, the second
    // batch's jobs start a turn later (place()), so the first batch's MACK is on the wire while
    // this process runs the second batch, as with the pops (received()).
    const kept = done.filter((d) => d.result !== undefined);
    const bare = done.filter((d) => d.result === undefined);
    for (const group of [kept, bare])
      for (let i = 0; i < group.length; i += this.batch) {
        const chunk = group.slice(i, i + this.batch);
        if (chunk.length === 1) {
          const { job, value, result } = chunk[0]!;
          this.track(this.ackThenNext(job, value, result));
        } else this.track(this.ackManyThenNext(chunk));
      }
  }

  /** The finished jobs of other queues: one MACK per queue and result kind (a lone job: ACK). */
  private flushAcks(): void {
    const acks = this.acking;
    if (acks.length === 0) return;
    this.acking = [];
    const groups = new Map<string, Finishing[]>();
    for (const a of acks) {
      const k = `${a.result === undefined ? 0 : 1}${a.job.queue}`;
      const g = groups.get(k);
      if (g) g.push(a);
      else groups.set(k, [a]);
    }
    for (const g of groups.values()) {
      if (g.length === 1) {
        const { job, value, result } = g[0]!;
        this.track(this.settle(job, value, result, undefined, false));
      } else this.track(this.ackMany(g));
    }
  }

  /** ORCA.MACK without NEXT: each job's outcome; refused as a whole, each job on its own. */
  private async ackMany(done: Finishing[]): Promise<void> {
    let reply: P.MackReply;
    try {
      reply = await this.writer.resending(
        done.map((d) => d.job),
        "ack",
        () => this.writer.exec(this.strategy.ackMany(done)),
      );
    } catch (e) {
      if (this.byOne(e)) {
        for (const { job, value, result } of done) await this.settle(job, value, result, undefined, false);
      } else for (const { job } of done) this.finishFailed(job, e, "ack");
      return;
    }
    this.settled(done, reply.outcomes);
  }

  /**
   * Whether a MACK refused as a whole is to be retried job by job: a result over
   * orca.max-payload-bytes (only its job fails), or a server without ORCA.MACK (a module older
   * than this client: from then on, plain ACKs).
   */
  private byOne(e: unknown): boolean {
    if (e instanceof ResultTooLargeError) return true;
    if (!(e instanceof Error) || !/unknown command/i.test(e.message)) return false;
    if (!this.noMack) this.log.warn("the server has no ORCA.MACK (an older module): acking job by job");
    this.noMack = true;
    return true;
  }

  /** The outcomes of a MACK: `completed`, or lost (or an error) for each job. */
  private settled(done: Finishing[], outcomes: (Error | null)[]): void {
    done.forEach(({ job, value }, i) => {
      const outcome = outcomes[i];
      if (outcome === null) {
        this.counts.completed++;
        this.emitSafe("completed", job, value);
      } else this.finishFailed(job, outcome ?? new Error("ORCA.MACK gave no outcome"), "ack");
    });
  }

  /** ORCA.MACK ... NEXT: the jobs the reply brings run in the slots the acked ones held. */
  private async ackManyThenNext(done: Finishing[]): Promise<void> {
    let reply: P.MackReply | undefined;
    try {
      reply = await this.writer.resending(
        done.map((d) => d.job),
        "ack",
        () => this.writer.exec(this.strategy.ackManyNext(done, done.length)),
      );
    } catch (e) {
      // Refused as a whole (a result too large, the connection): each job on its own, so one
      // oversized result fails only its job.
      this.reserved -= done.length;
      this.schedulePump();
      if (this.byOne(e)) {
        for (const { job, value, result } of done) await this.settle(job, value, result, undefined, false);
      } else for (const { job } of done) this.finishFailed(job, e, "ack");
      return;
    }
    this.settled(done, reply.outcomes);
    const jobs = reply.jobs;
    // A second batch's reply in the same turn: start its jobs a turn later (see flushFinishing).
    if (this.dispatchedThisTurn && jobs.length > 0 && !this.stopping)
      await new Promise<void>((resolve) => setImmediate(this.placeLater, done.length, jobs, resolve));
    else await this.place(done.length, jobs);
  }

  // Methods and bound fields rather than closures made per batch: V8 then optimizes one function
  // per step instead of re-optimizing a fresh closure for every MACK.
  /** The jobs a MACK ... NEXT of `n` deliveries brought run in the slots those held. */
  private async place(n: number, jobs: Job[]): Promise<void> {
    this.reserved -= n;
    if (jobs.length < n && !this.strategy.several) this.drained = true;
    if (this.stopping) await this.handBack(jobs, "leased by MACK ... NEXT while stopping, handed back");
    else {
      if (jobs.length > 0) this.markDispatched();
      for (const next of jobs) this.start(next);
    }
    this.schedulePump();
  }

  /**
   * A second batch, a turn later: the first batch's finishes leave first (its MACK is corked
   * until the next tick), then this batch runs while the server works on them.
   */
  private readonly placeLater = (n: number, jobs: Job[], resolve: () => void): void => {
    this.flushFinishing();
    process.nextTick(this.placeNow, n, jobs, resolve);
  };

  private readonly placeNow = (n: number, jobs: Job[], resolve: () => void): void => {
    this.place(n, jobs).then(resolve, resolve);
  };

  /** Jobs were started in this turn: a second batch arriving in it waits a turn. */
  private markDispatched(): void {
    if (this.dispatchedThisTurn) return;
    this.dispatchedThisTurn = true;
    setImmediate(this.turnOver);
  }

  private readonly turnOver = (): void => {
    this.dispatchedThisTurn = false;
  };

  /** Counts `f` until it settles, so close() waits for it. */
  private track(f: Promise<void>): void {
    this.pending++;
    f.then(this.untrack, this.untrack);
  }

  private readonly untrack = (): void => {
    if (--this.pending === 0) this.settledAll?.();
  };

  private async settle(
    job: Job,
    value: unknown,
    result: Buffer | string | undefined,
    error: unknown,
    failed: boolean,
  ): Promise<void> {
    if (failed) return this.fail(job, error);
    try {
      await this.writer.resending([job], "ack", () => this.writer.exec(this.strategy.ack(job, result)));
    } catch (e) {
      // A result the server refuses as too large changed nothing: the delivery failed.
      if (e instanceof ResultTooLargeError) return this.fail(job, e);
      this.finishFailed(job, e, "ack");
      return;
    }
    this.counts.completed++;
    this.emitSafe("completed", job, value);
  }

  /** ACK ... FORWARD: the delivery finishes and its successor is enqueued in one step. */
  private async handOff(job: Job, f: Forward, result: Buffer | string | undefined): Promise<void> {
    const to = { queue: typeof f.queue === "string" ? f.queue : f.queue.name, config: f.config };
    try {
      await this.writer.resending([job], "ack", () =>
        this.writer.exec(this.strategy.ackForward(job, to, result)),
      );
    } catch (e) {
      if (e instanceof ResultTooLargeError) return this.fail(job, e);
      this.finishFailed(job, e, "hand off");
      return;
    }
    this.counts.completed++;
    this.emitSafe("completed", job, f);
  }

  /** NACKs a failed delivery; its outcome goes to the `failed` event. */
  private async fail(job: Job, error: unknown): Promise<void> {
    let outcome: NackOutcome;
    try {
      const delayMs = error instanceof JobFailed ? error.delayMs : undefined;
      outcome = await this.writer.resending([job], "nack", () =>
        this.writer.exec(this.strategy.nack(job, delayMs, errorText(error))),
      );
    } catch (e) {
      this.finishFailed(job, e, "nack");
      return;
    }
    this.counts.failed++;
    const text = errorText(error);
    this.log.warn(`job ${job.key} failed (attempt ${job.attempt}; ${outcome.outcome}): ${text}`);
    this.emitSafe("failed", job, error, outcome);
  }

  /** ACK ... NEXT: the job the reply brings runs in the same slot (or is handed back at a stop). */
  private async ackThenNext(job: Job, value: unknown, result: Buffer | string | undefined): Promise<void> {
    let next: Job | null | undefined;
    try {
      next = await this.writer.resending([job], "ack", () =>
        this.writer.exec(this.strategy.ackNext(job, result)),
      );
      this.counts.completed++;
      this.emitSafe("completed", job, value);
    } catch (e) {
      // Refused as too large, the ACK handed nothing out: NACK, and the pump refills the slot.
      if (e instanceof ResultTooLargeError) await this.fail(job, e);
      else this.finishFailed(job, e, "ack");
    }
    this.reserved--;
    if (next) {
      if (this.stopping) await this.handBack([next], "leased by NEXT while stopping, handed back");
      else this.start(next);
    } else if (next === null && !this.strategy.several) {
      this.drained = true; // the queue had nothing for this slot: block instead of polling
    }
    this.schedulePump();
  }

  private finishFailed(job: Job, e: unknown, what: string): void {
    if (e instanceof LeaseLostError) this.lost(job, e);
    else {
      this.log.error(
        `job ${job.key}: could not ${what} (${String(e)}); its lease will expire and it comes back`,
      );
      this.emitError(e);
    }
  }

  private lost(job: Job, e: LeaseLostError | string): void {
    const reason =
      typeof e === "string" ? e : e instanceof JobCancelledError ? "job was cancelled" : "lease lost";
    if (!job.abandon(reason)) return;
    if (typeof e !== "string") this.counts.lost++;
    this.log.warn(
      `job ${job.key} (queue ${job.queue}, lease ${job.lease}): ${reason}; its result will be dropped`,
    );
    this.emitSafe("lost", job, reason);
  }

  // -- heartbeats -------------------------------------------------------------------------
  private beat(): void {
    const now = Date.now();
    for (const r of this.running) {
      if (r.finished || r.job.abandoned !== undefined || now - r.lastBeat < this.heartbeatMs) continue;
      r.lastBeat = now; // one heartbeat in flight per job
      this.writer.exec(this.strategy.extend(r.job)).then(
        () => undefined,
        (e: unknown) => {
          if (e instanceof LeaseLostError) this.lost(r.job, e);
          else {
            r.lastBeat = 0; // try again at the next tick
            this.log.warn(`heartbeat of job ${r.job.key}: ${String(e)}`);
          }
        },
      );
    }
  }

  // -- shutdown ---------------------------------------------------------------------------
  /**
   * Stops taking jobs, waits up to `graceMs` (or `opts.graceMs`) for running handlers, hands
   * back the rest, waits for pending acks and closes the worker's connections.
   */
  close(opts: { graceMs?: number } = {}): Promise<void> {
    this.closing ??= this.shutdown(opts.graceMs ?? this.graceMs);
    return this.closing;
  }

  private async shutdown(graceMs: number): Promise<void> {
    this.stopping = true;
    clearTimeout(this.backoffTimer);
    this.log.info(`worker stopping: no new jobs; ${this.running.size} running`);
    // Pops in flight come back (a blocking one woken by CLIENT UNBLOCK); what they bring
    // is handed back by received().
    let misses = 0;
    while (this.blocking || this.inFlight > 0) {
      const back = new Promise<void>((resolve) => (this.fetchBack = resolve));
      // UNBLOCK can reach the server before the pop it aims at (two connections): then it
      // unblocks nothing, and is sent again shortly (then every 20 ms, as for a pop that is
      // not blocked yet). It is raced with the pop coming back: against a server going away,
      // the command connection retries UNBLOCK (for seconds) while the pop has already failed.
      if (this.blocking) {
        const unblocked = await Promise.race([back.then(() => undefined), this.unblock()]);
        if (unblocked === false) misses++;
      }
      await Promise.race([back, sleep(misses > 0 && misses <= 10 ? 2 : 20)]); // woken when a pop returns
    }
    this.fetchBack = undefined;
    const deadline = Date.now() + graceMs;
    while (this.running.size > 0 && !this.hurried && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.wakeClose = this.hurry = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    this.wakeClose = undefined;
    this.flushFinishing(); // finishes waiting for the check phase: acked now (plain ACKs), tracked below
    const leftovers = [...this.running].filter((r) => !r.finished);
    for (const r of leftovers) r.finished = true;
    this.running.clear();
    // A delivery whose lease is already lost is not ours to hand back.
    await this.handBack(
      leftovers.map((r) => r.job).filter((j) => j.abandoned === undefined),
      "handed back at shutdown",
    );
    if (this.pending > 0) await new Promise<void>((resolve) => (this.settledAll = resolve));
    clearInterval(this.beatTimer);
    if (this.onSignal) {
      process.off("SIGTERM", this.onSignal);
      process.off("SIGINT", this.onSignal);
    }
    this.blocker?.disconnect();
    this.shards?.close();
    await this.conn.quit().catch(() => this.conn.disconnect());
    this.log.info(`worker stopped: ${JSON.stringify(this.counts)}`);
    this.emitSafe("closed");
  }

  /** CLIENT UNBLOCK of the blocking connection: whether it unblocked a command. */
  private async unblock(): Promise<boolean> {
    if (this.shards) return this.shards.unblock().then(() => true);
    if (this.blockerId === undefined) return false;
    try {
      // Still being asked for (the first blocking pop): wait for it rather than a poll period.
      return Number(await this.conn.call("CLIENT", "UNBLOCK", await this.blockerId)) === 1;
    } catch (e) {
      this.log.debug(`CLIENT UNBLOCK failed: ${String(e)}`);
      return false;
    }
  }

  private async handBack(jobs: Job[], reason: string): Promise<void> {
    if (jobs.length === 0) return;
    for (const job of jobs) this.lost(job, reason);
    this.counts.handedBack += jobs.length;
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

  // -- events -----------------------------------------------------------------------------
  private emitSafe(event: string, ...args: unknown[]): void {
    try {
      this.emit(event, ...args);
    } catch (e) {
      this.log.error(`'${event}' listener threw: ${String(e)}`);
    }
  }

  private emitError(e: unknown): void {
    if (this.listenerCount("error") > 0) this.emitSafe("error", e);
  }
}

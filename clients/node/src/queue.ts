import { checkBlocking } from "./connection";
import { Durability, isWrite, type WaitOptions } from "./durability";
import { LeaseLostError, OrcaError } from "./errors";
import { Config, encodeResult } from "./keys";
import * as P from "./protocol";
import { send, type RedisClient } from "./send";
import { Job, NackOutcome, QueueSettings, QueueStats, SettingsChange, TickReport } from "./types";

export { send as run };

/** A popped Job, or an orca key with its lease token. */
export type Delivery = Job | { key: string; lease: string };

/** What the server answers for a lease it does not hold (docs/commands.md, ORCA.ACK). */
const LEASE_NOT_HELD =
  "lease not held (it expired and the job was handed out again, was already acked or nacked, or never existed)";

function delivery(d: Delivery): [string, string] {
  if (d.lease === undefined) throw new TypeError("job has no lease (it was not popped with a lease)");
  return [d.key, d.lease];
}

/**
 * An Orca queue (one Redis key of type `orcaqueue`) reached through an ioredis client.
 * Orca keys are the 44-character strings of `orcaKey()`; a popped Job can be passed wherever
 * a key and a lease are needed. With `enableAutoPipelining: true` on the client, concurrent
 * calls (e.g. many `enqueue()` awaited together) share round trips.
 */
export class Queue {
  /** How this queue's writes wait for replicas (see `durability.ts`). */
  readonly durability: Durability;

  /**
   * `opts.waitReplicas` (with `waitTimeoutMs`, default 1000): each write resolves only once that
   * many replicas have it, else rejects with NotReplicatedError; `waitAof`: WAITAOF (the AOF
   * fsync on the master and those replicas). A Worker built on this Queue waits the same way.
   */
  constructor(
    readonly client: RedisClient,
    readonly name: string,
    opts: WaitOptions = {},
  ) {
    this.durability = new Durability(opts);
    this.durability.check(client);
  }

  /** The same queue on the same client with other durable-write settings (those not given kept). */
  withWait(opts: WaitOptions): Queue {
    const d = this.durability;
    return new Queue(this.client, this.name, {
      waitReplicas: d.replicas,
      waitTimeoutMs: d.timeoutMs,
      waitAof: d.aof,
      ...opts,
    });
  }

  private run<T>(cmd: P.Command<T>): Promise<T> {
    if (!this.durability.on || !isWrite(cmd.args)) return send(this.client, cmd);
    return this.durability
      .send(this.client, cmd)
      .then(([value, reply]) => this.durability.confirm(reply, value));
  }

  /** ORCA.ENQUEUE: create-or-update in its collation (a PUT). The reply has no payload. */
  enqueue(config: Config, opts: { now?: number } = {}): Promise<Job> {
    return this.run(P.enqueue(this.name, config, opts.now));
  }

  /**
   * ORCA.ENQUEUE of many configs in one round trip: each entry is the write reply or the
   * OrcaError that config got (the others are enqueued all the same).
   */
  enqueueMany(configs: Config[]): Promise<(Job | OrcaError)[]> {
    // Issued in one turn, so they leave in one write (see send.ts).
    return Promise.all(
      configs.map((c) =>
        this.run(P.enqueue(this.name, c)).catch((e: unknown) => {
          if (e instanceof OrcaError) return e;
          throw e;
        }),
      ),
    );
  }

  /** ORCA.IMMEDIATE: create-or-update as an immediate job (upgrading a waiting one). */
  immediate(config: Config, opts: { now?: number } = {}): Promise<Job> {
    return this.run(P.immediate(this.name, config, opts.now));
  }

  /** ORCA.REENQUEUE: hand a job back, immediate at its original arrival time. */
  reenqueue(config: Config, createdAt: number): Promise<Job> {
    return this.run(P.reenqueue(this.name, config, createdAt));
  }

  /** ORCA.MOVE RELEASE (to the very front) or DELAY (to the very back). */
  move(key: string, where: P.MoveTo, opts: { now?: number; bufferMs?: number } = {}): Promise<Job> {
    return this.run(P.move(this.name, key, where, opts));
  }
  release(key: string): Promise<Job> {
    return this.move(key, "RELEASE");
  }
  delay(key: string, opts: { bufferMs?: number } = {}): Promise<Job> {
    return this.move(key, "DELAY", opts);
  }

  /** ORCA.DELETE: remove the job in any state (a running lease is cancelled). */
  delete(key: string): Promise<boolean> {
    return this.run(P.del(this.name, key));
  }

  /** ORCA.STATUS: the job with its state (and position when queued), or null. */
  status(key: string): Promise<Job | null> {
    return this.run(P.status(this.name, key));
  }

  /**
   * One page of ORCA.LIST: queued jobs in pop order with their positions, or with `state`
   * (`held`, `leased`, `delayed`, `dead`) the jobs in that state; `gate` keeps the held jobs of
   * one gate.
   */
  listPage(opts: P.ListOptions & { offset?: number; limit?: number } = {}): Promise<Job[]> {
    return this.run(P.listPage(this.name, opts.offset ?? 0, opts.limit ?? 100, opts));
  }

  /** Every job of the listing (see listPage), fetched page by page (lazily). */
  async *list(opts: P.ListOptions & { pageSize?: number; offset?: number } = {}): AsyncGenerator<Job> {
    const size = opts.pageSize ?? 100;
    let offset = opts.offset ?? 0;
    for (;;) {
      const page = await this.run(P.listPage(this.name, offset, size, opts));
      yield* page;
      if (page.length < size) return;
      offset += page.length;
    }
  }

  /** ORCA.STATS: counts by state and wait-time statistics. */
  stats(): Promise<QueueStats> {
    return this.run(P.stats(this.name));
  }
  /** ORCA.LEN: queued jobs (O(1)). */
  len(): Promise<number> {
    return this.run(P.len(this.name));
  }
  /** ORCA.CHECK: rejects with InvariantError if an invariant is broken. */
  check(): Promise<void> {
    return this.run(P.check(this.name));
  }
  /**
   * ORCA.SETTINGS: without arguments, read them; else change those given (the others stay) and
   * resolve to them all. A string sets the collation order alone.
   */
  settings(change: SettingsChange | "lifo" | "fifo" = {}): Promise<QueueSettings> {
    return this.run(P.settings(this.name, typeof change === "string" ? { order: change } : change));
  }

  /**
   * ORCA.GATE ... CLOSE: new jobs naming `gate` (config field `"gate"`) are held from now on.
   * Resolves to true if the gate was open, false if it was already closed.
   */
  closeGate(gate: string): Promise<boolean> {
    return this.run(P.gateClose(this.name, gate));
  }
  /** ORCA.GATE ... OPEN: every held job of the gate enters the queue at its arrival time; how many. */
  openGate(gate: string): Promise<number> {
    return this.run(P.gateOpen(this.name, gate));
  }
  /**
   * ORCA.GATE ... DROP: removes every held job of the gate and resolves to their configs
   * (parsed, in arrival order), so the caller can tell each `response_url`.
   */
  dropGate(gate: string): Promise<Record<string, unknown>[]> {
    return this.run(P.gateDrop(this.name, gate));
  }
  /** ORCA.TICK: apply the time-driven changes due now. */
  tick(): Promise<TickReport> {
    return this.run(P.tick(this.name));
  }

  /** ORCA.DEAD LIST: one page of dead letters, in the order they died. */
  dead(opts: { offset?: number; limit?: number } = {}): Promise<Job[]> {
    return this.run(P.deadList(this.name, opts.offset ?? 0, opts.limit ?? 100));
  }
  /** Every dead letter, page by page. */
  async *iterDead(opts: { pageSize?: number } = {}): AsyncGenerator<Job> {
    const size = opts.pageSize ?? 100;
    for (let offset = 0; ;) {
      const page = await this.dead({ offset, limit: size });
      yield* page;
      if (page.length < size) return;
      offset += page.length;
    }
  }
  /** ORCA.DEAD REQUEUE: a dead job back, immediate, with fresh attempts. */
  requeueDead(key: string): Promise<Job> {
    return this.run(P.deadRequeue(this.name, key));
  }
  /** ORCA.DEAD PURGE: forget every dead letter; resolves to how many. */
  purgeDead(): Promise<number> {
    return this.run(P.deadPurge(this.name));
  }
  /** ORCA.RESULT: the result kept by the job's last ACK, or null. */
  result(key: string): Promise<Buffer | null> {
    return this.run(P.result(this.name, key));
  }

  /**
   * ORCA.POP. `blockMs` only on a Queue whose client is a `blockingConnection()`: a blocking pop
   * on a shared ioredis connection would hold back every other command behind it, and a client
   * timeout shorter than BLOCK leases the job to a reader that is gone (Worker does it all).
   */
  pop(opts: P.PopOptions = {}): Promise<Job | null> {
    checkBlocking(this.client, opts.blockMs);
    return this.run(P.pop(this.name, opts));
  }
  /** ORCA.POP ... COUNT n: up to `count` jobs. */
  popMany(count: number, opts: P.PopOptions = {}): Promise<Job[]> {
    checkBlocking(this.client, opts.blockMs);
    return this.run(P.popMany(this.name, count, opts));
  }
  /**
   * ORCA.ACK: the delivery succeeded; `result` (Buffers as they are, `undefined` keeps none,
   * anything else as JSON, `null` included) is kept for `ttlMs`. Rejects with LeaseLostError
   * (JobCancelledError) if not held.
   */
  ack(d: Delivery, opts?: { result?: unknown; ttlMs?: number }): Promise<void>;
  /**
   * With `forward`, ORCA.ACK ... FORWARD: the ACK and the enqueue of the successor (`config` into
   * `queue`, as `enqueue` would) happen in one atomic step, or neither; resolves to the
   * successor's write reply. In a Cluster both queues must share a hash tag.
   */
  ack(
    d: Delivery,
    opts: { result?: unknown; ttlMs?: number; forward: { queue: string | Queue; config: Config } },
  ): Promise<Job>;
  ack(
    d: Delivery,
    opts: { result?: unknown; ttlMs?: number; forward?: { queue: string | Queue; config: Config } } = {},
  ): Promise<void | Job> {
    const [key, lease] = delivery(d);
    const result = encodeResult(opts.result);
    if (opts.forward === undefined) return this.run(P.ack(this.name, key, lease, result, opts.ttlMs));
    const forward = { queue: queueName(opts.forward.queue), config: opts.forward.config };
    return this.run(P.ackForward(this.name, key, lease, forward, result, opts.ttlMs));
  }
  /**
   * ORCA.ACK ... NEXT: acks like `ack` and, in the same atomic step, leases the next job of this
   * queue for `leaseMs` (default orca.lease-time): one round trip per job. Resolves to that job,
   * or null if nothing can be handed out (it never blocks). If the ACK is refused
   * (LeaseLostError) nothing is handed out.
   */
  ackNext(
    d: Delivery,
    opts: { result?: unknown; ttlMs?: number; leaseMs?: number; worker?: string } = {},
  ): Promise<Job | null> {
    const [key, lease] = delivery(d);
    const result = encodeResult(opts.result);
    return this.run(
      P.ackNext(this.name, key, lease, {
        result,
        ttlMs: opts.ttlMs,
        leaseMs: opts.leaseMs,
        worker: opts.worker,
      }),
    );
  }
  /**
   * ORCA.MACK: acks several deliveries in one command. Each entry is a delivery, or
   * `{ delivery, result }` (results encoded as for `ack`). Resolves to one outcome per entry, in
   * order: `null` if acked, else the error `ack` would have rejected with (LeaseLostError,
   * JobCancelledError); a refused delivery never stops the others. With `next`, also leases up
   * to `next.count` jobs (default one per entry) for `next.leaseMs`, in the same atomic step,
   * whatever the outcomes: `jobs` (empty if none).
   *
   * The server takes a result for every delivery of a command or for none, so entries with and
   * without a result go as two commands: those with a result first (refused as a whole, e.g. a
   * result over orca.max-payload-bytes, it rejects and nothing has changed), then the others
   * with `next` (an error reply to that second command is then the outcome of each of its
   * deliveries, none of them acked). A delivery given twice is sent once; its repeats get what
   * the server answers a repeat ("lease not held", or the first one's error), as if acked in
   * the order given.
   */
  async ackMany(
    entries: (Delivery | { delivery: Delivery; result?: unknown })[],
    opts: { ttlMs?: number; next?: { leaseMs?: number; count?: number } } = {},
  ): Promise<P.MackReply> {
    const items: P.MackItem[] = entries.map((e) => {
      const withResult = "delivery" in e;
      const [key, lease] = delivery(withResult ? e.delivery : e);
      return { key, lease, result: withResult ? encodeResult(e.result) : undefined };
    });
    if (items.length === 0) throw new RangeError("ackMany needs at least one delivery");
    const next = opts.next && { count: items.length, ...opts.next };
    const kept = items.filter((i) => i.result !== undefined).length;
    if (kept === 0 || kept === items.length)
      return this.run(P.mack(this.name, items, { ttlMs: opts.ttlMs, next }));
    const first = new Map<string, number>();
    items.forEach((i, n) => {
      if (!first.has(`${i.key} ${i.lease}`)) first.set(`${i.key} ${i.lease}`, n);
    });
    const firstOf = (n: number) => first.get(`${items[n]!.key} ${items[n]!.lease}`)!;
    const firsts = items.map((_, n) => n).filter((n) => firstOf(n) === n);
    const groups = [
      firsts.filter((n) => items[n]!.result !== undefined),
      firsts.filter((n) => items[n]!.result === undefined),
    ].filter((g) => g.length > 0);
    const got = new Map<number, Error | null>();
    let jobs: Job[] = [];
    for (const [g, group] of groups.entries()) {
      const last = g === groups.length - 1;
      let reply: P.MackReply;
      try {
        reply = await this.run(
          P.mack(
            this.name,
            group.map((n) => items[n]!),
            { ttlMs: opts.ttlMs, next: last ? next : undefined },
          ),
        );
      } catch (e) {
        // The first refused as a whole: nothing changed. The second: the first's are done,
        // so its error is the outcome of each of its deliveries (none acked).
        if (g === 0 || !(e instanceof OrcaError)) throw e;
        group.forEach((n) => got.set(n, e));
        continue;
      }
      group.forEach((n, k) => got.set(n, reply.outcomes[k] ?? null));
      if (last) jobs = reply.jobs;
    }
    const outcomes = items.map((_, n) => {
      const f = firstOf(n);
      if (f === n) return got.get(n) ?? null;
      return got.get(f) ?? new LeaseLostError(LEASE_NOT_HELD, `NOLEASE ${LEASE_NOT_HELD}`, "NOLEASE");
    });
    return { outcomes, jobs };
  }
  /**
   * ORCA.NACK: the delivery failed; resolves to retry / dead / superseded. `error`: why (sent as
   * `ERROR <text>`, cut to 4096 characters), kept with the attempt and the dead letter. With
   * `forward`, a failure that makes the job a dead letter also enqueues the successor (a failures
   * or callback queue) in the same step: `successor`.
   */
  nack(
    d: Delivery,
    opts: { delayMs?: number; error?: string; forward?: { queue: string | Queue; config: Config } } = {},
  ): Promise<NackOutcome> {
    const [key, lease] = delivery(d);
    if (opts.forward === undefined) return this.run(P.nack(this.name, key, lease, opts.delayMs, opts.error));
    const forward = { queue: queueName(opts.forward.queue), config: opts.forward.config };
    return this.run(P.nackForward(this.name, key, lease, forward, opts.delayMs, opts.error));
  }
  /**
   * ORCA.NACK ... NEXT: fails the delivery like `nack` and leases the next job (or null). The
   * server then does not say what became of the failed one; use `nack` to know.
   */
  nackNext(
    d: Delivery,
    opts: { delayMs?: number; leaseMs?: number; error?: string; worker?: string } = {},
  ): Promise<Job | null> {
    const [key, lease] = delivery(d);
    return this.run(P.nackNext(this.name, key, lease, opts));
  }
  /** ORCA.EXTEND: the lease now ends `ms` from now; resolves to the new deadline. */
  extend(d: Delivery, ms: number): Promise<number> {
    const [key, lease] = delivery(d);
    return this.run(P.extend(this.name, key, lease, ms));
  }
}

/** The client all `queues` share (checked fit for `blockMs`) and their names. */
function mpopTarget(queues: Queue[], blockMs: number | undefined): [RedisClient, string[]] {
  const first = queues[0];
  if (!first) throw new RangeError("ORCA.MPOP needs at least one queue");
  if (queues.some((q) => q.client !== first.client))
    throw new RangeError("every queue of one ORCA.MPOP must use the same Redis client");
  checkBlocking(first.client, blockMs);
  return [first.client, queues.map((q) => q.name)];
}

/**
 * ORCA.MPOP: leases one job from the first of `queues` (in order) that can hand one out;
 * `Job.queue` names it. `blockMs` (wait on all of them, woken by any) only on queues whose client
 * is a `blockingConnection()`. In a Redis Cluster every queue must be in one slot (hash tags:
 * `{course}:q1`).
 */
export function mpop(queues: Queue[], opts: P.PopOptions = {}): Promise<Job | null> {
  const [client, names] = mpopTarget(queues, opts.blockMs);
  return send(client, P.mpop(names, opts));
}

/** ORCA.MPOP ... COUNT n: up to `count` jobs, all from the first queue that has any. */
export function mpopMany(queues: Queue[], count: number, opts: P.PopOptions = {}): Promise<Job[]> {
  const [client, names] = mpopTarget(queues, opts.blockMs);
  return send(client, P.mpopMany(names, count, opts));
}

function queueName(q: string | Queue): string {
  return typeof q === "string" ? q : q.name;
}

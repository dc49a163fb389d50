/**
 * Durable writes: a write that resolves only once replicas (or AOF fsyncs) confirm it.
 *
 * A Queue made with `{ waitReplicas: n }` (and/or `waitAof: true`) sends each write followed by
 * `WAIT n timeout` (or `WAITAOF 1 n timeout`) on the same connection, in the same write to the
 * socket: WAIT counts the replicas that acknowledged everything this connection wrote, so its
 * answer covers the write just before it. Fewer than asked rejects with NotReplicatedError (the
 * write itself stands on the master).
 *
 * What a caller may assume:
 * - **Resolved**: the write is on the master and on at least `n` replicas (with `waitAof`:
 *   fsynced to the master's AOF and `n` replicas' AOFs). A Sentinel failover promotes the
 *   replica with the most data, so the write survives the loss of the master.
 * - **NotReplicatedError**: the write was applied on the master and may or may not survive its
 *   loss. An enqueue can be sent again (a PUT: the job is created or updated once); an ACK sent
 *   again after it was applied is refused as LeaseLostError (it was acked).
 * - **A connection error**: the write may or may not have been applied; as above.
 */
import type { Redis } from "ioredis";

import { NotReplicatedError } from "./errors";
import type * as P from "./protocol";
import { isCluster, send, sendRaw, type RedisClient } from "./send";

export interface WaitOptions {
  /** Replicas that must confirm each write (WAIT). Default 0: writes do not wait. */
  waitReplicas?: number;
  /** How long a write waits for them (default 1000 ms). */
  waitTimeoutMs?: number;
  /** Also wait for the AOF fsync on the master and those replicas (WAITAOF, Redis 7.2+ / Valkey). */
  waitAof?: boolean;
}

/** The commands that change nothing: no WAIT after them. */
const READS = new Set(["ORCA.STATUS", "ORCA.LIST", "ORCA.STATS", "ORCA.LEN", "ORCA.CHECK", "ORCA.RESULT"]);

export function isWrite(args: P.Arg[]): boolean {
  return !READS.has(String(args[0]).toUpperCase());
}

export const WAITAOF_MISSING =
  "waitAof needs WAITAOF (Redis 7.2+, Valkey 7.2+); this server does not have it: use waitReplicas alone";

/** Clients known to have WAITAOF (probed once each). */
const hasWaitAof = new WeakSet<object>();

export class Durability {
  readonly replicas: number;
  readonly timeoutMs: number;
  readonly aof: boolean;

  constructor(o: WaitOptions = {}) {
    this.replicas = o.waitReplicas ?? 0;
    this.timeoutMs = o.waitTimeoutMs ?? 1000;
    this.aof = o.waitAof ?? false;
    if (!(Number.isSafeInteger(this.replicas) && this.replicas >= 0))
      throw new RangeError("waitReplicas must be an integer >= 0");
    if (!(Number.isSafeInteger(this.timeoutMs) && this.timeoutMs >= 1))
      throw new RangeError("waitTimeoutMs must be an integer >= 1");
  }

  get on(): boolean {
    return this.replicas > 0 || this.aof;
  }

  /** Refuses a client this cannot work on (a Cluster may send WAIT on another connection). */
  check(client: RedisClient): void {
    if (this.on && isCluster(client))
      throw new TypeError(
        "waitReplicas / waitAof are not supported on an ioredis Cluster: WAIT has no key, so a " +
          "Cluster may send it on another connection than the write it should confirm",
      );
  }

  args(): P.Arg[] {
    return this.aof ? ["WAITAOF", 1, this.replicas, this.timeoutMs] : ["WAIT", this.replicas, this.timeoutMs];
  }

  /** Undefined if `reply` (of `args()`) confirms the write, else why, the count, local. */
  shortfall(reply: unknown): [string, number, boolean | undefined] | undefined {
    if (this.aof) {
      const [local, replicas] = (reply as unknown[]).map(Number) as [number, number];
      if (local >= 1 && replicas >= this.replicas) return undefined;
      return [`WAITAOF: local fsync ${local}/1, ${replicas}/${this.replicas} replicas`, replicas, local >= 1];
    }
    const replicas = Number(reply);
    if (replicas >= this.replicas) return undefined;
    return [`WAIT: ${replicas}/${this.replicas} replicas`, replicas, undefined];
  }

  /** Rejects with NotReplicatedError (carrying `value`) unless `reply` confirms the write. */
  confirm<T>(reply: unknown, value: T): T {
    const short = this.shortfall(reply);
    if (short === undefined) return value;
    const [why, replicas, local] = short;
    throw new NotReplicatedError(
      `the write was applied by the master but not confirmed within ${this.timeoutMs} ms (${why})`,
      value,
      replicas,
      this.replicas,
      local,
    );
  }

  /** With `waitAof`, once per client: refuse before writing on a server without WAITAOF. */
  async probe(client: RedisClient): Promise<void> {
    if (!this.aof || hasWaitAof.has(client)) return;
    try {
      await (client as Redis).call("WAITAOF", 0, 0, 0);
    } catch (e) {
      if (e instanceof Error && /unknown command/i.test(e.message)) throw new TypeError(WAITAOF_MISSING);
      throw e;
    }
    hasWaitAof.add(client);
  }

  /**
   * `cmd`, then its WAIT, issued in the same turn on `client` (one write to the socket). The
   * WAIT's raw reply comes with the write's value; a write re-sent in its legacy form (a module
   * without FORMAT VALUES) gets a WAIT of its own after it.
   */
  async send<T>(client: RedisClient, cmd: P.Command<T>): Promise<[T, unknown]> {
    await this.probe(client);
    let wrote = false;
    let waitedFirst = false;
    const write = send(client, cmd).finally(() => (wrote = true));
    const wait = sendRaw(client, this.args()).finally(() => (waitedFirst = !wrote));
    let value: T;
    try {
      value = await write;
    } catch (e) {
      wait.catch(() => undefined);
      throw e;
    }
    let reply = await wait;
    if (waitedFirst) reply = await sendRaw(client, this.args());
    return [value, reply];
  }
}

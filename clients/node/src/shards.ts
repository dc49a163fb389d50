/**
 * A Worker's blocking pops on an ioredis Cluster.
 *
 * One ORCA.MPOP takes keys of one hash slot, so the worker's queues are grouped by slot (queues
 * sharing a hash tag share a group) and, when every group is empty, each group waits on a
 * blocking connection of its own to the node that serves its slot (`blockingConnection()` of
 * the Cluster's own connection to that node). The first pop that returns wakes the others
 * (`CLIENT UNBLOCK` on their nodes) and what all of them brought is collected (jobs beyond the
 * free slots, from pops that returned at the same moment, are handed back by the worker).
 *
 * A slot that moved (`MOVED`), is moving (`ASK`, `TRYAGAIN`) or a cluster that is down makes
 * that group's blocking connection go: the next one is opened to the slot's new owner, after
 * the worker's non-blocking pops (through the Cluster, which follows redirections) ran again.
 * A blocking pop is never re-sent elsewhere by itself: it could lease a job to a reader that is
 * gone.
 */
import type { Cluster, Redis } from "ioredis";
import calculateSlot from "cluster-key-slot";

import { blockingConnection } from "./connection";
import { send as run } from "./send";
import type { FetchStrategy } from "./strategy";
import type { Job } from "./types";
import type { Logger } from "./worker";

const REDIRECT = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;
/** After a redirection, how long before that group blocks again (its slot is moving). */
const REDIRECT_PAUSE_MS = 100;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

interface Blocker {
  node: string; // host:port
  conn: Redis; // blocking connection (no timeouts, no re-send)
  nodeClient: Redis; // the Cluster's own connection to that node, for CLIENT UNBLOCK
  id: Promise<number>; // CLIENT ID of conn
}

export class ClusterBlockers {
  private readonly blockers = new Map<number, Blocker>();

  constructor(
    private readonly cluster: Cluster,
    readonly groups: FetchStrategy[],
    private readonly log: Logger,
  ) {}

  private blocker(i: number): Blocker {
    const slot = calculateSlot(this.groups[i]!.queues[0]!);
    const owner = this.cluster.slots[slot]?.[0];
    const nodeClient = this.cluster
      .nodes("master")
      .find((n) => `${n.options.host}:${n.options.port}` === owner);
    if (owner === undefined || nodeClient === undefined)
      throw new Error(`no node known for slot ${slot} yet (cluster ${this.cluster.status})`);
    const have = this.blockers.get(i);
    if (have?.node === owner) return have;
    this.drop(i);
    const conn = blockingConnection(nodeClient, "orca-blocking");
    conn.on("error", (e: Error) => this.log.warn(`worker blocking connection to ${owner}: ${e.message}`));
    const b: Blocker = { node: owner, conn, nodeClient, id: conn.call("CLIENT", "ID").then(Number) };
    b.id.catch(() => undefined);
    this.blockers.set(i, b);
    return b;
  }

  private drop(i: number): void {
    const b = this.blockers.get(i);
    if (b === undefined) return;
    this.blockers.delete(i);
    b.conn.disconnect();
  }

  private async popOne(i: number, want: number): Promise<Job[]> {
    try {
      const b = this.blocker(i);
      await b.id;
      return await run(b.conn, this.groups[i]!.blocking(want));
    } catch (e) {
      this.drop(i);
      if (!(e instanceof Error) || !REDIRECT.test(e.message)) throw e;
      this.log.info(
        `queues ${this.groups[i]!.queues.join(", ")} moved or moving (${e.message}): reconnecting`,
      );
      if (e.message.startsWith("MOVED")) this.cluster.refreshSlotsCache();
      await sleep(REDIRECT_PAUSE_MS);
      return [];
    }
  }

  /**
   * Blocks on every group at once (each for up to `want` jobs) until one returns, then wakes the
   * others and resolves to what they all brought (possibly more than `want`). Rejects with the
   * first error only if no pop brought jobs.
   */
  async pop(want: number): Promise<Job[]> {
    const pops = this.groups.map((_, i) => this.popOne(i, want));
    let settled = false;
    const all = Promise.allSettled(pops).then((r) => {
      settled = true;
      return r;
    });
    await Promise.race(pops.map((p) => p.catch(() => undefined)));
    // A pop may not be blocked yet when UNBLOCK arrives: sent again until all are back.
    while (!settled) {
      await this.unblock();
      await Promise.race([all, sleep(20)]);
    }
    const jobs: Job[] = [];
    let error: unknown;
    for (const r of await all) {
      if (r.status === "fulfilled") jobs.push(...r.value);
      else error ??= r.reason;
    }
    if (error !== undefined && jobs.length === 0) throw error;
    if (error !== undefined) this.log.warn(`a blocking pop failed (${String(error)}); the others' jobs run`);
    return jobs;
  }

  /** Wakes every group's blocking pop (at a stop, or once one group has jobs). */
  async unblock(): Promise<void> {
    await Promise.all(
      [...this.blockers.values()].map(async (b) => {
        try {
          await b.nodeClient.call("CLIENT", "UNBLOCK", await b.id);
        } catch (e) {
          this.log.debug(`CLIENT UNBLOCK on ${b.node} failed: ${String(e)}`);
        }
      }),
    );
  }

  close(): void {
    for (const i of [...this.blockers.keys()]) this.drop(i);
  }
}

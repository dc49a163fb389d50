/**
 * Redis Cluster: three masters with the module; Queue and Worker on an ioredis Cluster. Commands
 * go straight to the node serving the queue's slot; two workers drain queues on every shard (two
 * share a hash tag, so one MPOP serves both) while one queue's slot is migrated (ASK during the
 * move, MOVED after): every job is done, none by two deliveries at once, every queue checks out.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Cluster } from "ioredis";

import { Job, Queue, Worker, mpop } from "../src";
import { ClusterSet } from "./deploy";
import { calls, waitFor } from "./server";

let set: ClusterSet;
let rc: Cluster;
before(async () => {
  set = await ClusterSet.start(3);
  rc = set.client();
});
after(() => {
  rc.disconnect();
  set.close();
});

/** Queue names with at least one on every node, plus two sharing a hash tag. */
async function spread(prefix: string): Promise<string[]> {
  const names: string[] = [];
  const owners = new Set<number>();
  for (let i = 0; owners.size < set.nodes.length || names.length < 4; i++) {
    names.push(`${prefix}-${i}`);
    owners.add((await set.owner(`${prefix}-${i}`)).port);
  }
  return [...names, `{${prefix}-tag}:a`, `{${prefix}-tag}:b`];
}

describe("on a Redis Cluster", () => {
  it("routes every command to the node that serves the queue", async () => {
    const names = await spread("route");
    for (const n of set.nodes) {
      const c = n.client();
      await c.call("CONFIG", "RESETSTAT");
      c.disconnect();
    }
    for (const name of names) {
      const q = new Queue(rc, name);
      const job = await q.enqueue({ key: "a", response_url: "" });
      const popped = await q.pop({ leaseMs: 10_000 });
      assert.equal(popped?.key, job.key);
      await q.ack(popped!, { result: { x: 1 } });
      assert.equal(String(await q.result(job.key)), '{"x":1}');
      await q.check();
    }
    // No command went to a node that does not serve its queue (that node would answer MOVED).
    let moved = 0;
    for (const n of set.nodes) {
      const c = n.client();
      const stats = String(await c.call("INFO", "errorstats"));
      moved += Number(/errorstat_MOVED:count=(\d+)/.exec(stats)?.[1] ?? 0);
      c.disconnect();
    }
    assert.equal(moved, 0, "commands sent to the wrong node");
    const [a, b] = [new Queue(rc, "{route-tag}:a"), new Queue(rc, "{route-tag}:b")];
    await b.enqueue({ key: "t" });
    assert.equal((await mpop([a, b], { leaseMs: 10_000 }))?.queue, "{route-tag}:b");
    void calls;
  });

  it("workers drain every shard through a slot migration", async () => {
    const names = await spread("drain");
    const perQueue = 40;
    for (const name of names)
      await new Queue(rc, name).enqueueMany(
        Array.from({ length: perQueue }, (_, i) => ({ key: `${name}-${i}`, sleep_ms: 5 + (i % 20) })),
      );
    const runs: [string, number, number][] = [];
    const handler = async (job: Job) => {
      const start = performance.now();
      await new Promise((r) => setTimeout(r, (job.config as { sleep_ms: number }).sleep_ms));
      runs.push([job.key, start, performance.now()]);
      return { queue: job.queue };
    };
    const clients = [set.client(), set.client()];
    const workers = clients.map(
      (c) =>
        new Worker(
          names.map((n) => new Queue(c, n)),
          handler,
          { concurrency: 3, leaseMs: 10_000, blockMs: 1000, handleSignals: false },
        ),
    );
    const total = perQueue * names.length;
    const done = () => workers.reduce((s, w) => s + w.counts.completed, 0);
    try {
      await waitFor(() => runs.length > total / 5, 60_000);
      const moved = names[0]!;
      const src = await set.owner(moved);
      const dst = set.nodes.find((n) => n !== src)!;
      await set.migrate(moved, dst, 500);
      assert.equal((await set.owner(moved)).port, dst.port);
      await waitFor(() => done() >= total, 120_000);
      for (let i = 0; i < 10; i++) await new Queue(rc, moved).enqueue({ key: `late-${i}`, sleep_ms: 1 });
      await waitFor(() => done() === total + 10, 60_000);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      for (const c of clients) c.disconnect();
    }
    const byKey = new Map<string, [number, number][]>();
    for (const [key, start, end] of runs) byKey.set(key, [...(byKey.get(key) ?? []), [start, end]]);
    assert.equal(byKey.size, total + 10);
    for (const spans of byKey.values()) {
      spans.sort((x, y) => x[0] - y[0]);
      for (let i = 1; i < spans.length; i++) assert.ok(spans[i]![0] >= spans[i - 1]![1], "ran twice at once");
    }
    for (const name of names) {
      const st = await new Queue(rc, name).stats();
      assert.deepEqual([st.queued, st.leased, st.delayed, st.dead], [0, 0, 0, 0], name);
      await new Queue(rc, name).check();
    }
  });
});

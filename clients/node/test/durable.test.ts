/**
 * Durable writes (WAIT / WAITAOF after each write, on the same connection) and a worker's
 * finishes surviving a connection blip (re-sent while the lease may be held).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { Job, NotReplicatedError, Queue, Worker, configOrcaKey } from "../src";
import { Server, cfg, qname, waitFor } from "./server";

let master: Server;
let replica: Server;
let m: Redis;
let rr: Redis;

before(async () => {
  master = await Server.start("--repl-diskless-sync-delay", "0");
  replica = await Server.start("--replicaof", "127.0.0.1", String(master.port));
  m = master.client();
  rr = replica.client();
  // A replica's first sync: wait for its link, never a fixed sleep.
  await waitFor(async () => /master_link_status:up/.test(await rr.info("replication")), 30_000);
});
after(() => {
  m.disconnect();
  rr.disconnect();
  replica.stop();
  master.stop();
});

describe("durable writes", () => {
  it("an enqueue is on the replica when it resolves", async () => {
    const name = qname();
    const q = new Queue(m, name, { waitReplicas: 1, waitTimeoutMs: 5000 });
    const onReplica = new Queue(rr, name);
    for (let i = 0; i < 10; i++) {
      const job = await q.enqueue(cfg(`d${i}`));
      assert.ok(await onReplica.status(job.key), `d${i} not on the replica`);
    }
    const many = await q.enqueueMany([cfg("m1"), cfg("m2"), cfg("m3")]);
    assert.ok(many.every((j) => j instanceof Job));
    assert.equal(await onReplica.len(), 13);
  });

  it("rejects with NotReplicatedError when no replica confirms, the write standing", async () => {
    const name = qname();
    const q = new Queue(m, name, { waitReplicas: 1, waitTimeoutMs: 200 });
    process.kill(replica.pid!, "SIGSTOP");
    try {
      const t0 = Date.now();
      const e = await q.enqueue(cfg("late")).then(
        () => assert.fail("resolved"),
        (err: unknown) => err,
      );
      assert.ok(e instanceof NotReplicatedError, String(e));
      assert.ok(Date.now() - t0 >= 150);
      assert.ok(e.value instanceof Job);
      assert.deepEqual([e.replicas, e.wanted], [0, 1]);
      assert.ok(await new Queue(m, name).status((e.value as Job).key));
      assert.ok((await q.withWait({ waitReplicas: 0 }).enqueue(cfg("fast"))).key);
    } finally {
      process.kill(replica.pid!, "SIGCONT");
    }
    await waitFor(async () => (await new Queue(rr, name).len()) === 2);
  });

  it("refuses waitAof before writing on a server without WAITAOF", async (t) => {
    const hasWaitAof = await m.call("WAITAOF", 0, 0, 0).then(
      () => true,
      () => false,
    );
    if (hasWaitAof) return t.skip("this server has WAITAOF");
    const name = qname();
    await assert.rejects(new Queue(m, name, { waitAof: true }).enqueue(cfg("x")), /WAITAOF/);
    assert.equal(await new Queue(m, name).len(), 0);
  });

  it("a durable worker runs every job and confirms its writes", async () => {
    const name = qname();
    const q = new Queue(m, name, { waitReplicas: 1, waitTimeoutMs: 5000 });
    for (let i = 0; i < 20; i++) await q.enqueue(cfg(`w${i}`));
    const w = new Worker(q, (job) => ({ ok: job.key }), {
      concurrency: 4,
      handleSignals: false,
      blockMs: 500,
    });
    try {
      await waitFor(() => w.counts.completed === 20);
      await q.enqueue(cfg("late")); // wakes the blocking pop; confirmed before it runs
      await waitFor(() => w.counts.completed === 21);
    } finally {
      await w.close();
    }
    assert.equal(w.counts.unconfirmed, 0);
    const onReplica = new Queue(rr, name);
    await waitFor(async () => (await onReplica.stats()).leased === 0);
    for (let i = 0; i < 20; i++) assert.ok(await onReplica.result(configOrcaKey(cfg(`w${i}`))));
  });

  it("a Queue on a Cluster refuses durable writes", async () => {
    const { Cluster } = await import("ioredis");
    const c = new Cluster([{ host: "127.0.0.1", port: master.port }], { lazyConnect: true });
    assert.throws(() => new Queue(c, "q", { waitReplicas: 1 }), /not supported on an ioredis Cluster/);
    c.disconnect();
  });
});

describe("a finish across a server restart", () => {
  it("re-sends the ACK on the new connection and completes the job once", async () => {
    const node = await Server.start("--appendonly", "yes", "--appendfsync", "always");
    const r = node.client();
    r.on("error", () => {});
    try {
      const name = qname();
      const key = (await new Queue(r, name).enqueue(cfg("blip"))).key;
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      const runs: string[] = [];
      const w = new Worker(
        new Queue(r, name),
        async (job) => {
          runs.push(job.lease!);
          await gate;
          return { done: "yes" };
        },
        {
          leaseMs: 30_000,
          blockMs: 500,
          handleSignals: false,
          logger: { ...console, debug() {}, info() {} },
        },
      );
      w.on("error", () => {});
      try {
        await waitFor(() => runs.length === 1);
        node.kill();
        release(); // the ACK now fails (the server is gone) and is retried
        await new Promise((res) => setTimeout(res, 1500));
        await node.restart();
        await waitFor(() => w.counts.completed === 1, 30_000);
      } finally {
        await w.close();
      }
      assert.equal(String(await new Queue(r, name).result(key)), '{"done":"yes"}');
      // Finished once, its result kept.
      assert.equal((await new Queue(r, name).status(key))?.state, "done");
      assert.deepEqual([runs.length, w.counts.lost], [1, 0]);
    } finally {
      r.disconnect();
      node.stop();
    }
  });
});

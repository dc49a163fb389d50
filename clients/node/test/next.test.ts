/** ORCA.ACK/NACK ... NEXT and ORCA.MPOP through the Queue API. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  Job,
  JobCancelledError,
  LeaseLostError,
  OrcaError,
  Queue,
  ResultTooLargeError,
  blockingConnection,
  mpop,
  mpopMany,
} from "../src";
import { cfg, fileServer, qname } from "./server";

const ctx = fileServer();

describe("NEXT and MPOP", () => {
  it("ackNext acks and leases the next job", async () => {
    const q = new Queue(ctx.r, qname());
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) keys.push((await q.enqueue(cfg(`k${i}`, { priority: i }))).key);
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    assert.equal(job.key, keys[0]);
    const next = (await q.ackNext(job, { result: { score: 1 }, leaseMs: 30_000 }))!;
    assert.deepEqual([next.key, next.queue, next.attempt], [keys[1], q.name, 1]);
    assert.ok(next.lease && next.deadline! - next.createdAt >= 30_000);
    assert.equal((await q.result(job.key))?.toString(), '{"score":1}');
    assert.equal((await q.status(next.key))?.state, "leased");
    const last = (await q.ackNext(next))!;
    assert.equal(last.key, keys[2]);
    assert.equal(await q.ackNext(last), null);
    assert.equal((await q.stats()).leased, 0);
  });

  it("ackNext on a stale lease hands out nothing", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("a"));
    await q.enqueue(cfg("b", { priority: 10 }));
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    await q.ack(job);
    await assert.rejects(q.ackNext(job), LeaseLostError);
    assert.equal(await q.len(), 1);
    assert.equal((await q.stats()).leased, 0);
  });

  it("nackNext fails the job and leases the next", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("fails"));
    const second = await q.enqueue(cfg("next", { priority: 10 }));
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    const next = (await q.nackNext(job, { delayMs: 60_000, leaseMs: 10_000 }))!;
    assert.deepEqual([next.key, next.queue], [second.key, q.name]);
    assert.equal((await q.status(job.key))?.state, "delayed");
    assert.equal(await q.nackNext(next, { delayMs: 60_000 }), null);
  });

  it("ackMany acks a batch, one outcome each, and leases their successors", async () => {
    const q = new Queue(ctx.r, qname());
    const keys: string[] = [];
    for (let i = 0; i < 8; i++) keys.push((await q.enqueue(cfg(`m${i}`, { priority: i }))).key);
    const [a, b, c, d] = await q.popMany(4, { leaseMs: 60_000 });
    await q.ack(b!); // lost before the batch
    await q.delete(c!.key); // cancelled while it ran
    const { outcomes, jobs } = await q.ackMany(
      [{ delivery: a!, result: { s: 1 } }, b!, c!, { delivery: d!, result: Buffer.from([0, 255]) }],
      {
        next: { leaseMs: 30_000 },
      },
    );
    assert.equal(outcomes[0], null);
    assert.ok(outcomes[1] instanceof LeaseLostError && !(outcomes[1] instanceof JobCancelledError));
    assert.ok(outcomes[2] instanceof JobCancelledError);
    assert.equal(outcomes[3], null);
    // One per delivery given, whatever the outcomes.
    assert.deepEqual(
      jobs.map((j) => j.key),
      keys.slice(4, 8),
    );
    assert.ok(jobs.every((j) => j.queue === q.name && j.lease && j.deadline! - j.createdAt >= 30_000));
    assert.equal((await q.result(a!.key))?.toString(), '{"s":1}');
    assert.deepEqual(await q.result(d!.key), Buffer.from([0, 255]));
    const again = await q.ackMany(jobs, { ttlMs: 0 });
    assert.deepEqual(again, { outcomes: [null, null, null, null], jobs: [] });
    const none = await q.ackMany(jobs, { next: { count: 3 } });
    assert.equal(none.jobs.length, 0);
    assert.ok(none.outcomes.every((o) => o instanceof LeaseLostError));
    await assert.rejects(q.ackMany([]), RangeError);
  });

  it("ackMany with and without results: all or nothing, in the order given", async () => {
    const q = new Queue(ctx.r, qname());
    for (let i = 0; i < 6; i++) await q.enqueue(cfg(`o${i}`, { priority: i }));
    const [a, b, c] = await q.popMany(3, { leaseMs: 60_000 });
    // A result over the limit: refused before anything is acked (results go first).
    await ctx.r.config("SET", "orca.max-payload-bytes", "10");
    try {
      await assert.rejects(
        q.ackMany([a!, { delivery: b!, result: "x".repeat(50) }, { delivery: c!, result: "ok" }], {
          next: {},
        }),
        ResultTooLargeError,
      );
    } finally {
      await ctx.r.config("SET", "orca.max-payload-bytes", "4194304");
    }
    assert.equal((await q.stats()).leased, 3);
    // The same delivery twice: the first (with its result) acks, the repeat is refused.
    const got = await q.ackMany(
      [{ delivery: a!, result: { x: 1 } }, a!, b!, { delivery: b!, result: "late" }, c!],
      {
        next: { count: 1 },
      },
    );
    assert.equal(got.outcomes[0], null);
    assert.ok(got.outcomes[1] instanceof LeaseLostError);
    assert.equal(got.outcomes[2], null);
    assert.ok(got.outcomes[3] instanceof LeaseLostError);
    assert.equal(got.outcomes[4], null);
    assert.equal(got.jobs.length, 1);
    assert.equal((await q.result(a!.key))?.toString(), '{"x":1}');
    assert.equal(await q.result(b!.key), null);
  });

  it("ackMany: NEXT beyond orca.max-pop-count takes that many; a refused second command is its deliveries' outcome", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueueMany(Array.from({ length: 14 }, (_, i) => cfg(`p${i}`, { priority: i })));
    const popped = await q.popMany(12, { leaseMs: 60_000 });
    await ctx.r.config("SET", "orca.max-pop-count", "10");
    try {
      // Three with a result, nine without: two commands, NEXT with the second.
      const got = await q.ackMany(
        popped.map((job, i) => (i < 3 ? { delivery: job, result: i } : job)),
        { next: { leaseMs: 60_000 } },
      );
      assert.deepEqual(got.outcomes, Array(12).fill(null));
      assert.equal(got.jobs.length, 2); // what is left, at most 10
      // The second command refused (a LEASE the clock cannot hold): the first's are acked.
      const [a, b] = got.jobs as [Job, Job];
      const bad = await q.ackMany([{ delivery: a, result: "r" }, b], { next: { leaseMs: 2 ** 53 - 1 } });
      assert.equal(bad.outcomes[0], null);
      assert.ok(bad.outcomes[1] instanceof OrcaError && bad.outcomes[1].code === "TIMERANGE");
      assert.deepEqual(bad.jobs, []);
      assert.equal((await q.status(b.key))?.state, "leased");
    } finally {
      await ctx.r.config("SET", "orca.max-pop-count", "1000");
    }
  });

  it("mpop takes from the first queue with jobs", async () => {
    const n = qname();
    const [qa, qb, qc] = ["a", "b", "c"].map((x) => new Queue(ctx.r, `{${n}}:${x}`)) as [Queue, Queue, Queue];
    assert.equal(await mpop([qa, qb, qc], { leaseMs: 1000 }), null);
    assert.deepEqual(await mpopMany([qa, qb], 3), []);
    await qc.enqueue(cfg("c1"));
    await qb.enqueue(cfg("b1"));
    await qb.enqueue(cfg("b2", { priority: 5 }));
    const job = (await mpop([qa, qb, qc], { leaseMs: 60_000 }))!;
    assert.deepEqual([job.queue, (job.config as { key: string }).key], [qb.name, "b1"]);
    let many = await mpopMany([qa, qb, qc], 5, { leaseMs: 60_000 });
    assert.deepEqual(
      many.map((j) => [j.queue, (j.config as { key: string }).key]),
      [[qb.name, "b2"]],
    );
    many = await mpopMany([qa, qb, qc], 5, { leaseMs: 60_000 });
    assert.deepEqual(
      many.map((j) => j.queue),
      [qc.name],
    );
    await qb.ack(job);
    assert.throws(() => mpop([qa, new Queue(ctx.server.client({ lazyConnect: true }), "x")]), RangeError);
    assert.throws(() => mpop([]), RangeError);
  });

  it("a blocking mpop needs a blocking connection, and wakes on any queue", async () => {
    const n = qname();
    assert.throws(() => mpop([new Queue(ctx.r, n)], { blockMs: 1000 }), /connection of its own/);
    assert.throws(() => new Queue(ctx.r, n).pop({ blockMs: 1000 }), /connection of its own/);
    const blocker = blockingConnection(ctx.r);
    const queues = [0, 1, 2].map((i) => new Queue(blocker, `${n}-${i}`));
    const waiting = mpop(queues, { leaseMs: 60_000, blockMs: 10_000 });
    await new Promise((res) => setTimeout(res, 300));
    const t0 = Date.now();
    await new Queue(ctx.r, `${n}-2`).enqueue(cfg("late"));
    const job = (await waiting)!;
    assert.ok(Date.now() - t0 < 2000);
    assert.equal(job.queue, `${n}-2`);
    blocker.disconnect();
  });
});

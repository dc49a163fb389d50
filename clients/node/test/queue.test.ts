import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import {
  BadConfigError,
  InvalidArgumentError,
  Job,
  JobCancelledError,
  JobStateError,
  LeaseLostError,
  NoSuchJobError,
  OrcaError,
  Queue,
  QueueFullError,
  WrongTypeError,
  configOrcaKey,
  orcaKey,
  FetchStrategy,
} from "../src";
import { MAX_POP_COUNT } from "../src/strategy";
import { Server, cfg, collect, qname } from "./server";

let server: Server;
let r: Redis;
before(async () => {
  server = await Server.start();
  r = server.client();
});
after(() => {
  r.disconnect();
  server.stop();
});

describe("Queue", () => {
  it("computes the server's orca key", async () => {
    const q = new Queue(r, qname());
    for (const [key, url] of [
      ["sub-41", "http://web/cb"],
      ["é ünïcode ✓", ""],
      ['{"id":1}', "x".repeat(300)],
    ] as const) {
      const job = await q.enqueue({ key, response_url: url });
      assert.equal(job.key, orcaKey(key, url));
      assert.equal(configOrcaKey({ key, response_url: url }), job.key);
    }
    assert.equal(orcaKey("a", "u"), "YyzS/qcdzeAFr04H8UuLwfaLY9nBs3PcYEj7h+kK8is=");
  });

  it("enqueues, updates, and reports status", async () => {
    const q = new Queue(r, qname());
    const c = cfg("a", { collation: { type: "user", id: "7" }, priority: 60000, script: [1] });
    const job = await q.enqueue(c);
    assert.equal(job.created, true);
    assert.equal(job.payload, undefined);
    assert.equal(job.collation, "user.7");
    assert.equal(job.releaseAt, job.createdAt + 60000);
    const again = await q.enqueue(JSON.stringify({ ...c, script: [3] }));
    assert.equal(again.created, false);
    const st = await q.status(job.key);
    assert.equal(st?.state, "queued");
    assert.equal(st?.position, 1);
    assert.deepEqual((st?.config as { script: number[] }).script, [3]);
    assert.equal(await q.len(), 1);
    assert.equal(await q.status(orcaKey("nope")), null);
  });

  it("moves, reenqueues and deletes", async () => {
    const q = new Queue(r, qname());
    const a = await q.enqueue(cfg("a", { collation: { type: "user", id: "1" }, priority: 1000 }));
    const b = await q.enqueue(cfg("b", { collation: { type: "user", id: "2" }, priority: 2000 }));
    const c = await q.immediate(cfg("c"));
    assert.ok(c.immediate);
    const keys = async () => (await collect(q.list())).map((j) => j.key);
    assert.deepEqual(await keys(), [c.key, a.key, b.key]);
    await q.release(b.key);
    assert.deepEqual(await keys(), [b.key, c.key, a.key]);
    const e = await q.enqueue(cfg("e", { priority: 10_000_000 }));
    await q.delay(a.key, { bufferMs: 5 });
    assert.deepEqual(await keys(), [b.key, c.key, e.key, a.key]);
    await assert.rejects(q.move(b.key, "DELAY"), JobStateError);
    const re = await q.reenqueue(cfg("d"), 5);
    assert.equal(re.createdAt, 5);
    assert.equal((await keys())[0], re.key);
    assert.equal(await q.delete(a.key), true);
    assert.equal(await q.delete(a.key), false);
    await assert.rejects(q.release(a.key), NoSuchJobError);
    await q.check();
  });

  it("lists every page, with a filter", async () => {
    const q = new Queue(r, qname());
    const keys: string[] = [];
    for (let i = 0; i < 23; i++) {
      keys.push(
        (await q.enqueue(cfg(`k${i}`, { priority: i, metadata_table: { course: i % 3 ? "cs2" : "cs1" } })))
          .key,
      );
    }
    const all = await collect(q.list({ pageSize: 5 }));
    assert.deepEqual(
      all.map((j) => j.key),
      keys,
    );
    assert.deepEqual(
      all.map((j) => j.position),
      keys.map((_, i) => i + 1),
    );
    const cs1 = await collect(q.list({ filter: { course: "cs1" }, pageSize: 2 }));
    assert.deepEqual(
      cs1.map((j) => j.key),
      keys.filter((_, i) => i % 3 === 0),
    );
    assert.deepEqual(
      (await q.listPage({ offset: 20, limit: 10 })).map((j) => j.key),
      keys.slice(20),
    );
  });

  it("pops, acks with results, nacks, extends", async () => {
    const q = new Queue(r, qname());
    await q.enqueue(cfg("a"));
    await q.enqueue(cfg("b"));
    const job = await q.pop({ leaseMs: 60000 });
    assert.ok(job?.lease);
    assert.equal(job.attempt, 1);
    assert.equal(job.queue, q.name);
    assert.equal((job.config as { key: string }).key, "a");
    assert.ok((await q.extend(job, 120000)) >= job.deadline!);
    await q.ack(job, { result: { score: 97 } });
    assert.deepEqual(JSON.parse((await q.result(job.key))!.toString()), { score: 97 });
    const err = await q.ack(job).catch((e: unknown) => e);
    assert.ok(err instanceof LeaseLostError && !(err instanceof JobCancelledError));
    const b = (await q.pop({ leaseMs: 60000 }))!;
    const out = await q.nack(b, { delayMs: 0 });
    assert.equal(out.outcome, "retry");
    assert.equal(out.attempts, 1);
    const b2 = (await q.pop({ leaseMs: 60000 }))!;
    assert.equal(b2.attempt, 2);
    await q.ack({ key: b2.key, lease: b2.lease! }, { result: Buffer.from([0, 255, 1]) });
    assert.deepEqual(await q.result(b2.key), Buffer.from([0, 255, 1]));
    assert.equal(await q.pop(), null);
    assert.deepEqual(await q.popMany(3), []);
  });

  it("pops many, cancels running jobs, keeps dead letters", async () => {
    const q = new Queue(r, qname());
    for (let i = 0; i < 4; i++) await q.enqueue(cfg(`k${i}`));
    const jobs = await q.popMany(3, { leaseMs: 60000 });
    assert.equal(jobs.length, 3);
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased, st.order], [1, 3, "lifo"]);
    assert.equal(st.waitReleased.count >= 0, true);
    assert.equal((await q.status(jobs[0]!.key))?.leases[0]?.lease, jobs[0]!.lease);
    assert.ok(await q.delete(jobs[0]!.key));
    await assert.rejects(q.extend(jobs[0]!, 1000), JobCancelledError);
    await r.call("CONFIG", "SET", "orca.max-attempts", "1");
    try {
      assert.equal((await q.nack(jobs[1]!)).outcome, "dead");
    } finally {
      await r.call("CONFIG", "SET", "orca.max-attempts", "5");
    }
    const dead = await q.dead();
    assert.deepEqual(
      dead.map((d) => [d.key, d.state, d.cause]),
      [[jobs[1]!.key, "dead", "failed"]],
    );
    assert.equal((await collect(q.iterDead({ pageSize: 1 }))).length, 1);
    assert.ok((await q.requeueDead(jobs[1]!.key)).immediate);
    assert.equal(await q.purgeDead(), 0);
  });

  it("reads and sets settings, ticks", async () => {
    const q = new Queue(r, qname());
    assert.equal((await q.settings()).order, "lifo");
    const s = await q.settings("fifo");
    assert.deepEqual([s.order, s.jobs, s.collations, s.held], ["fifo", 0, 0, 0]);
    assert.deepEqual(await q.tick(), { died: 0, expired: 0, forgotten: 0, lifetime: 0, retried: 0 });
  });

  it("maps error replies to classes", async () => {
    const q = new Queue(r, qname());
    await assert.rejects(q.enqueue({ nokey: 1 }), BadConfigError);
    await assert.rejects(q.enqueue(cfg("a", { priority: -1 })), BadConfigError);
    await assert.rejects(q.enqueue("[1]"), BadConfigError);
    await assert.rejects(q.popMany(0), InvalidArgumentError);
    await r.set(`${q.name}-str`, "x");
    await assert.rejects(new Queue(r, `${q.name}-str`).len(), WrongTypeError);
    await r.call("CONFIG", "SET", "orca.max-queue-length", "1");
    try {
      await q.enqueue(cfg("one"));
      const e = await q.enqueue(cfg("two")).catch((x: unknown) => x);
      assert.ok(e instanceof QueueFullError && e instanceof OrcaError);
      assert.equal((e as OrcaError).code, "QUEUEFULL");
      assert.match((e as OrcaError).reply, /^QUEUEFULL queue is full/);
    } finally {
      await r.call("CONFIG", "SET", "orca.max-queue-length", "10000000");
    }
  });

  it("pipelines enqueueMany and reports each entry", async () => {
    const q = new Queue(r, qname());
    const out = await q.enqueueMany([cfg("a"), "not json", cfg("b")]);
    assert.ok(out[0] instanceof Job && out[2] instanceof Job);
    assert.ok(out[1] instanceof BadConfigError);
    assert.equal(await q.len(), 2);
  });

  it("worker strategy: capped pops, MPOP over several queues, ACK NEXT, hand-back", () => {
    // Every command that hands out jobs asks for them as values (FORMAT VALUES), last.
    const V = ["FORMAT", "VALUES"];
    const one = new FetchStrategy(["a"], { leaseMs: 5000, blockMs: 5000 });
    assert.deepEqual(one.quick(5000).args, ["ORCA.POP", "a", "LEASE", 5000, "COUNT", MAX_POP_COUNT, ...V]);
    assert.deepEqual(one.blocking(3).args, ["ORCA.POP", "a", "LEASE", 5000, "BLOCK", 5000, "COUNT", 3, ...V]);
    const s = new FetchStrategy(["a", "b"], { leaseMs: 5000, blockMs: 7000, resultTtlMs: 9 });
    assert.deepEqual(s.quick(2).args, ["ORCA.MPOP", 2, "a", "b", "LEASE", 5000, "COUNT", 2, ...V]);
    // One blocking MPOP over every queue, with the full BLOCK: woken by any of them.
    assert.deepEqual(s.blocking(3).args, [
      "ORCA.MPOP",
      2,
      "a",
      "b",
      "LEASE",
      5000,
      "BLOCK",
      7000,
      "COUNT",
      3,
      ...V,
    ]);
    // Without FORMAT (the fallback for an older server): the same command.
    assert.deepEqual(s.blocking(3).legacy?.args, s.blocking(3).args.slice(0, -2));
    const job = (queue: string) =>
      Object.assign(new Job(), { key: "K", payload: '{"key":"k"}', createdAt: 42, lease: "7", queue });
    assert.deepEqual(s.ackNext(job("a"), "r").args, [
      "ORCA.ACK",
      "a",
      "K",
      "7",
      "RESULT",
      "r",
      "TTL",
      9,
      "NEXT",
      "LEASE",
      5000,
      ...V,
    ]);
    // NEXT takes from the job's own queue: only the first queue keeps the argument order.
    assert.deepEqual([s.chains(job("a")), s.chains(job("b"))], [true, false]);
    assert.equal(
      new FetchStrategy(["a"], { leaseMs: 1, blockMs: 1, ackNext: false }).chains(job("a")),
      false,
    );
    assert.deepEqual(
      s.handBack(job("q")).map((c) => c.args),
      [
        ["ORCA.REENQUEUE", "q", '{"key":"k"}', 42],
        ["ORCA.NACK", "q", "K", "7", "DELAY", 0],
      ],
    );
    assert.throws(() => new FetchStrategy([], { leaseMs: 1, blockMs: 1 }), RangeError);
  });

  it("decodes RESP3 maps like RESP2 arrays", () => {
    const resp2 = [
      "attempt",
      1,
      "key",
      "K",
      "lease",
      "9",
      "payload",
      '{"a":1}',
      "leases",
      [["lease", "9", "deadline", 5, "attempts", 1]],
    ];
    const resp3 = new Map<string, unknown>([
      ["attempt", 1],
      ["key", "K"],
      ["lease", "9"],
      ["payload", '{"a":1}'],
      [
        "leases",
        [
          new Map<string, unknown>([
            ["lease", "9"],
            ["deadline", 5],
            ["attempts", 1],
          ]),
        ],
      ],
    ]);
    const a = Job.fromReply(resp2);
    const b = Job.fromReply(resp3);
    assert.deepEqual(
      [a.key, a.attempt, a.lease, a.config, a.leases],
      [b.key, b.attempt, b.lease, b.config, b.leases],
    );
    assert.throws(() => Job.fromReply(["key"]), TypeError);
  });
});

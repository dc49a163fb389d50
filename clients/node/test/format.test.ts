/**
 * Deliveries read as `FORMAT VALUES` (what every pop, NEXT and MACK ... NEXT of this client asks
 * for): the same Jobs as the map replies give, and a fallback to the maps for a server that
 * refuses the option (a module older than this client).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import Redis, { Command, ReplyError } from "ioredis";

import { Job, Queue, Worker, mpop, run } from "../src";
import * as P from "../src/protocol";
import { cfg, fileServer, qname } from "./server";

const ctx = fileServer();

/**
 * A Job's fields, for comparing two reads of the same delivery on twin queues. The deadline
 * comes from the server's clock, read a moment apart on the twins: it is checked on its own
 * (`sameDeadline`), with a tolerance.
 */
function shown(j: Job | null): Record<string, unknown> | null {
  if (j === null) return null;
  const { key, attempts, collation, createdAt, releaseAt, immediate, nonce, payload } = j;
  const { attempt, lease, queue } = j;
  return { key, attempts, collation, createdAt, releaseAt, immediate, nonce, payload, attempt, lease, queue };
}

/** Both leased (deadlines within a second of each other) or both not. */
function sameDeadline(a: (Job | null)[], b: (Job | null)[]): void {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => {
    const [da, db] = [x?.deadline, b[i]?.deadline];
    if (da === undefined || db === undefined) assert.equal(da, db);
    else assert.ok(Math.abs(da - db) < 1000, `deadlines ${da} and ${db}`);
  });
}

/** Twin queues with the same jobs: collation and none, an immediate, priorities. */
async function twins(): Promise<[Queue, Queue]> {
  const pair: [Queue, Queue] = [new Queue(ctx.r, qname()), new Queue(ctx.r, qname())];
  for (const q of pair)
    for (let i = 0; i < 8; i++) {
      const c = cfg(`k${i}`, { priority: i * 10, collation: i % 2 ? { type: "user", id: "7" } : undefined });
      await (i === 3 ? q.immediate(c, { now: 1000 + i }) : q.enqueue(c, { now: 1000 + i }));
    }
  return pair;
}

describe("FORMAT VALUES", () => {
  it("pops, NEXT and MACK ... NEXT read the same jobs as the maps", async () => {
    const [v, m] = await twins();
    const legacy = <T>(cmd: P.Command<T>) => run(ctx.r, cmd.legacy!);
    assert.ok(P.pop(v.name).args.includes("VALUES"), "the client asks for values");

    const a = await run(ctx.r, P.pop(v.name, { leaseMs: 60_000 }));
    const b = await legacy(P.pop(m.name, { leaseMs: 60_000 }));
    assert.deepEqual({ ...shown(a), queue: m.name }, shown(b));
    sameDeadline([a], [b]);
    assert.equal(a!.queue, v.name);

    const as = await run(ctx.r, P.popMany(v.name, 2, { leaseMs: 60_000 }));
    const bs = await legacy(P.popMany(m.name, 2, { leaseMs: 60_000 }));
    assert.equal(as.length, 2);
    assert.deepEqual(
      as.map((j) => ({ ...shown(j), queue: m.name })),
      bs.map(shown),
    );
    sameDeadline(as, bs);

    const an = await run(ctx.r, P.ackNext(v.name, a!.key, a!.lease!, { leaseMs: 60_000 }));
    const bn = await legacy(P.ackNext(m.name, b!.key, b!.lease!, { leaseMs: 60_000 }));
    assert.deepEqual({ ...shown(an), queue: m.name }, shown(bn));
    sameDeadline([an], [bn]);

    const am = await run(
      ctx.r,
      P.mack(v.name, [{ key: an!.key, lease: an!.lease! }], { next: { count: 2 } }),
    );
    const bm = await legacy(P.mack(m.name, [{ key: bn!.key, lease: bn!.lease! }], { next: { count: 2 } }));
    assert.deepEqual(am.outcomes, [null]);
    assert.deepEqual(
      am.jobs.map((j) => ({ ...shown(j), queue: m.name })),
      bm.jobs.map(shown),
    );
    sameDeadline(am.jobs, bm.jobs);

    const nn = await run(ctx.r, P.nackNext(v.name, as[0]!.key, as[0]!.lease!, { delayMs: 60_000 }));
    const mn = await legacy(P.nackNext(m.name, bs[0]!.key, bs[0]!.lease!, { delayMs: 60_000 }));
    assert.ok(nn !== null);
    assert.deepEqual({ ...shown(nn), queue: m.name }, shown(mn));
    sameDeadline([nn], [mn]);

    // LEASE 0: no lease, no deadline.
    const z = await v.pop({ leaseMs: 0 });
    assert.ok(z !== null);
    assert.deepEqual([z.lease, z.deadline, z.attempt], [undefined, undefined, 1]);
    assert.equal(typeof z.config, "object");
  });

  it("MPOP names each job's queue", async () => {
    const [a, b] = [new Queue(ctx.r, qname()), new Queue(ctx.r, qname())];
    await b.enqueue(cfg("only"));
    const j = (await mpop([a, b], { leaseMs: 60_000 }))!;
    assert.equal(j.queue, b.name);
    assert.equal((await b.status(j.key))?.lease, j.lease);
    await b.ack(j);
  });

  it("falls back to maps, once per connection, on a server that refuses FORMAT", async () => {
    // An older module refuses an unknown option before changing anything: every connection of
    // this process (the Worker's own ones included) answers FORMAT as it would.
    const proto = Redis.prototype as unknown as { sendCommand: (c: Command) => unknown };
    const original = proto.sendCommand;
    const refused = new Map<object, string[]>();
    proto.sendCommand = function (this: object, c: Command) {
      if (c.args.some((a) => String(a) === "FORMAT")) {
        refused.set(this, [...(refused.get(this) ?? []), c.name]);
        c.reject(new ReplyError("ERR unknown option 'FORMAT' (allowed: LEASE, BLOCK, COUNT)"));
        return c.promise;
      }
      return original.call(this, c);
    };
    try {
      const q = new Queue(ctx.r, qname());
      for (let i = 0; i < 6; i++) await q.enqueue(cfg(`f${i}`, { priority: i }));
      const first = (await q.pop({ leaseMs: 60_000 }))!;
      assert.equal((await q.status(first.key))?.lease, first.lease);
      const next = (await q.ackNext(first))!;
      assert.equal((await q.status(next.key))?.lease, next.lease);
      assert.deepEqual([...refused.values()], [["ORCA.POP"]], "refused once, then maps");
      await q.ack(next);
      // A Worker learns it on its own connections, and loses nothing.
      const done: string[] = [];
      const w = new Worker(q, (job) => done.push(job.key), { concurrency: 2, handleSignals: false });
      while (done.length < 4) await new Promise((r) => setTimeout(r, 10));
      await w.close();
      assert.equal(done.length, 4, "each job once");
      assert.equal(new Set(done).size, 4);
      const st = await q.stats();
      assert.deepEqual([st.queued, st.leased], [0, 0]);
      // A connection stops asking once refused: only commands already in flight were (the
      // Worker sends its first two pops together).
      for (const names of refused.values()) assert.ok(names.length <= 2, `${names}`);
      assert.ok(refused.size >= 2, "the worker's connection was refused too");
    } finally {
      proto.sendCommand = original;
    }
  });
});

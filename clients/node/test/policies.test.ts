/** Gates, the new settings, listing by state, and the refusals that name a job's state. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { BadConfigError, InvalidArgumentError, JobNotQueuedError, JobStateError, Queue } from "../src";
import { cfg, collect, fileServer, qname } from "./server";

const ctx = fileServer();

describe("gates", () => {
  it("close, hold, update in place, open", async () => {
    const q = new Queue(ctx.r, qname());
    assert.equal(await q.closeGate("img-hw3"), true);
    assert.equal(await q.closeGate("img-hw3"), false);
    const user = { type: "user", id: "7" };
    const held = await q.enqueue(cfg("h1", { collation: user, gate: "img-hw3" }));
    assert.deepEqual([held.state, held.gate, held.created], ["held", "img-hw3", true]);
    const free = await q.enqueue(cfg("f1", { gate: "img-other" }));
    assert.equal(free.state, undefined);
    const st = (await q.status(held.key))!;
    assert.deepEqual([st.state, st.gate, st.position], ["held", "img-hw3", undefined]);
    const again = await q.enqueue(cfg("h1", { collation: user, gate: "img-hw3", script: [2] }));
    assert.deepEqual([again.created, again.state], [false, "held"]);
    const stats = await q.stats();
    assert.deepEqual([stats.held, stats.gates, stats.queued], [1, { "img-hw3": 1 }, 1]);
    const listed = await collect(q.list({ state: "held", gate: "img-hw3" }));
    assert.deepEqual(
      listed.map((j) => [j.key, j.state, j.gate]),
      [[held.key, "held", "img-hw3"]],
    );
    assert.deepEqual((listed[0]!.config as { script: number[] }).script, [2]);
    const e = await q.release(held.key).catch((x: unknown) => x);
    assert.ok(e instanceof JobNotQueuedError && e instanceof JobStateError);
    assert.deepEqual([e.state, e.gate], ["held", "img-hw3"]);
    assert.equal(await q.openGate("img-hw3"), 1);
    assert.equal(await q.openGate("img-hw3"), 0);
    const now = (await q.status(held.key))!;
    assert.deepEqual([now.state, now.createdAt], ["queued", held.createdAt]);
    assert.deepEqual((await q.stats()).gates, {});
    await q.check();
  });

  it("drop returns the configs in arrival order", async () => {
    const q = new Queue(ctx.r, qname());
    await q.closeGate("img-hw4");
    const configs = [0, 1, 2].map((i) => cfg(`d${i}`, { gate: "img-hw4", n: i }));
    for (const c of configs) await q.enqueue(c);
    await q.delete((await q.enqueue(cfg("gone", { gate: "img-hw4" }))).key);
    assert.deepEqual(await q.dropGate("img-hw4"), configs);
    assert.deepEqual(await q.dropGate("img-hw4"), []);
    assert.equal((await q.stats()).held, 0);
  });

  it("errors", async () => {
    const q = new Queue(ctx.r, qname());
    await assert.rejects(q.closeGate(""), InvalidArgumentError);
    await assert.rejects(q.enqueue(cfg("a", { gate: "" })), BadConfigError);
    await assert.rejects(q.enqueue(cfg("a", { gate: 5 })), BadConfigError);
    await assert.rejects(q.listPage({ gate: "x" }), /GATE applies to STATE HELD only/);
    assert.throws(() => q.listPage({ state: "running" as never }), /state must be one of/);
  });
});

describe("settings and state", () => {
  it("reads and writes every setting", async () => {
    const q = new Queue(ctx.r, qname());
    const d = await q.settings();
    assert.deepEqual(
      [d.order, d.lifetimeMs, d.maxRunning, d.autodelay, d.jobs, d.held],
      ["lifo", 0, 0, { windowMs: 0, stepMs: 0, capMs: 0 }, 0, 0],
    );
    const change = {
      order: "fifo" as const,
      lifetimeMs: 86_400_000,
      autodelay: { windowMs: 900_000, stepMs: 60_000, capMs: 600_000 },
      maxRunning: 2,
      deadMax: 10,
      deadTtlMs: 3_600_000,
      resultMax: 50,
    };
    const s = await q.settings(change);
    assert.deepEqual(s, { ...change, jobs: 0, held: 0, collations: 0 });
    assert.deepEqual(await q.settings(), s);
    assert.deepEqual((await q.stats()).settings, s);
    const off = await q.settings({ autodelay: { windowMs: 0, stepMs: 0 } });
    assert.deepEqual([off.autodelay.windowMs, off.maxRunning, off.order], [0, 2, "fifo"]);
    await assert.rejects(q.settings({ maxRunning: -1 }), InvalidArgumentError);
    await assert.rejects(q.settings({ autodelay: { windowMs: 0, stepMs: 5 } }), /AUTODELAY/);
  });

  it("reports the automatic delay and the running cap", async () => {
    const q = new Queue(ctx.r, qname());
    await q.settings({ autodelay: { windowMs: 60_000, stepMs: 1000 }, maxRunning: 1 });
    const user = { type: "user", id: "1" };
    const a = await q.enqueue(cfg("c1", { collation: user }));
    const b = await q.enqueue(cfg("c2", { collation: user }));
    assert.deepEqual([a.delay, b.delay], [0, 1000]);
    const other = await q.enqueue(cfg("o1", { collation: { type: "user", id: "2" }, priority: 5000 }));
    const first = (await q.pop({ leaseMs: 60_000 }))!;
    const rest = [a.key, b.key].find((k) => k !== first.key)!;
    const st = (await q.status(rest))!;
    assert.deepEqual([st.state, st.capped], ["queued", true]);
    assert.deepEqual((await q.stats()).running, { "user.1": 1 });
    assert.equal((await q.pop({ leaseMs: 60_000 }))?.key, other.key); // user.1 is at its cap
  });

  it("MOVE names the state it refuses", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("run"));
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    let e = await q.delay(job.key).catch((x: unknown) => x);
    assert.ok(e instanceof JobNotQueuedError);
    assert.equal(e.state, "leased");
    await q.nack(job, { delayMs: 60_000 });
    e = await q.release(job.key).catch((x: unknown) => x);
    assert.ok(e instanceof JobNotQueuedError);
    assert.equal(e.state, "delayed");
    assert.ok(e.retryAt! > 0);
    await ctx.r.call("CONFIG", "SET", "orca.max-attempts", "1");
    try {
      await q.enqueue(cfg("dies"));
      const d = (await q.pop({ leaseMs: 60_000 }))!;
      assert.equal((await q.nack(d)).outcome, "dead");
      e = await q.release(d.key).catch((x: unknown) => x);
      assert.ok(e instanceof JobNotQueuedError);
      assert.equal(e.state, "dead");
      assert.deepEqual(
        (await q.listPage({ state: "dead" })).map((j) => [j.key, j.cause]),
        [[d.key, "failed"]],
      );
    } finally {
      await ctx.r.call("CONFIG", "SET", "orca.max-attempts", "5");
    }
  });
});

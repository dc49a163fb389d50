/**
 * The worker with ACK ... NEXT and ORCA.MPOP, each test on a server of its own so that INFO
 * commandstats counts exactly this worker's commands.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import {
  InvalidArgumentError,
  Job,
  NackOutcome,
  Queue,
  ResultTooLargeError,
  Worker,
  WorkerOptions,
} from "../src";
import { Server, calls, cfg, monitorCommands, waitFor } from "./server";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const cleanup: (() => void | Promise<void>)[] = [];
after(async () => {
  for (const f of cleanup) await f(); // workers first (unshifted), then clients and servers
});
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

async function own() {
  const server = await Server.start();
  const r = server.client();
  cleanup.push(() => {
    r.disconnect();
    server.stop();
  });
  return { server, r };
}

function start(q: Queue | Queue[], handler: (job: Job) => unknown, opts: WorkerOptions = {}): Worker {
  const w = new Worker(q, handler, { handleSignals: false, logger: quiet, ...opts });
  cleanup.unshift(() => w.close({ graceMs: 0 }));
  return w;
}

const JOBS = 200;

async function runAll(
  opts: WorkerOptions,
  handler: (job: Job) => unknown = (job) => ({ ok: job.key.length }),
) {
  const { r } = await own();
  const q = new Queue(r, "cycle");
  await q.enqueueMany(Array.from({ length: JOBS }, (_, i) => cfg(`k${i}`)));
  await r.config("RESETSTAT");
  const w = start(q, handler, { leaseMs: 60_000, ...opts });
  await waitFor(() => w.counts.completed === JOBS);
  await w.close();
  return { r, q };
}

describe("Worker with ACK ... NEXT and MPOP", () => {
  it("at a trickle, each finish acks and waits for the next job in one command", async () => {
    const { server, r } = await own();
    const q = new Queue(r, "trickle");
    const seen: number[] = [];
    const w = start(q, async () => void seen.push(Date.now()), { concurrency: 4 });
    await sleep(500); // blocked in its pop
    const commands = await monitorCommands(server);
    const sent: number[] = [];
    for (let i = 0; i < 30; i++) {
      sent.push(Date.now());
      await q.enqueue(cfg(`t${i}`));
      await sleep(30);
    }
    await waitFor(() => w.counts.completed === 30);
    const worker = [...(await commands.stop())].filter(
      ([n]) => n.startsWith("orca.") && n !== "orca.enqueue",
    );
    const total = worker.reduce((a, [, n]) => a + n, 0);
    // One per job (ORCA.MACK ... NEXT ... BLOCK); a POP and an ACK each would be 60. A few more
    // on a loaded machine: a finish that comes after the worker stopped waiting for it.
    assert.ok(total <= 40, JSON.stringify(worker));
    assert.ok(Math.max(...seen.map((s, i) => s - sent[i]!)) < 1000);
    await w.close();
  });

  it("a slot that finishes alone takes its next job with the ACK: one command per job", async () => {
    const { r, q } = await runAll({ concurrency: 1 });
    assert.equal(await calls(r, "orca.ack"), JOBS);
    const pops = await calls(r, "orca.pop");
    assert.ok(pops <= 3, `${pops} ORCA.POP for ${JOBS} jobs`); // to start, and once the queue ran dry
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased, st.results], [0, 0, JOBS]);
  });

  it("without ackNext, each freed slot is refilled by a pop", async () => {
    const { r } = await runAll({ concurrency: 1, ackNext: false });
    assert.equal(await calls(r, "orca.ack"), JOBS);
    assert.ok((await calls(r, "orca.pop")) >= JOBS);
  });

  it("slots that finish together share one ORCA.MACK ... NEXT", async () => {
    const { r, q } = await runAll({ concurrency: 16 });
    const [acks, macks, pops] = [
      await calls(r, "orca.ack"),
      await calls(r, "orca.mack"),
      await calls(r, "orca.pop"),
    ];
    const acked = Number(/orca_acked:(\d+)/.exec(await r.info("orca"))![1]);
    assert.equal(acked, JOBS);
    assert.ok(macks > 0 && acks + macks + pops <= JOBS / 4, `${acks} ACK, ${macks} MACK, ${pops} POP`);
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased, st.results], [0, 0, JOBS]);
  });

  it("handlers settling in one event-loop iteration (timers) share a MACK too", async () => {
    const { r } = await runAll({ concurrency: 16 }, async (job) => {
      await sleep(2);
      return { ok: job.key.length };
    });
    const [acks, macks, pops] = [
      await calls(r, "orca.ack"),
      await calls(r, "orca.mack"),
      await calls(r, "orca.pop"),
    ];
    assert.ok(macks > 0 && acks + macks + pops <= JOBS / 2, `${acks} ACK, ${macks} MACK, ${pops} POP`);
  });

  it("a batch with and without results, and a lost lease in a batch", async () => {
    const { r } = await own();
    const q = new Queue(r, "mixed");
    await q.enqueueMany(Array.from({ length: 40 }, (_, i) => cfg(`m${i}`)));
    const lost: string[] = [];
    const completed: string[] = [];
    const w = start(
      q,
      async (job) => {
        const n = Number((job.config as { key: string }).key.slice(1));
        if (n === 7) await q.delete(job.key); // cancelled while it runs: lost, not completed
        return n % 2 === 0 ? { n } : undefined;
      },
      { concurrency: 8, leaseMs: 60_000 },
    );
    w.on("lost", (job: Job) => lost.push(job.key));
    w.on("completed", (job: Job) => completed.push(job.key));
    await waitFor(() => completed.length + lost.length === 40);
    await w.close();
    assert.equal(lost.length, 1);
    assert.equal(w.counts.lost, 1);
    assert.ok((await calls(r, "orca.mack")) > 0);
    const results = await Promise.all(completed.map((k) => q.result(k)));
    const kept = results.filter((x) => x !== null).map((x) => x.toString());
    assert.equal(kept.length, 20); // the even ones
    assert.ok(kept.every((x) => /^\{"n":\d+\}$/.test(x)));
  });

  it("serves several queues in order with MPOP and wakes on any, whatever the client's timeout", async () => {
    const { server } = await own();
    const c = server.client({ commandTimeout: 200 }); // far below BLOCK
    cleanup.push(() => c.disconnect());
    const [qa, qb, qc] = ["a", "b", "c"].map((x) => new Queue(c, `{grading}:${x}`)) as [Queue, Queue, Queue];
    for (let i = 0; i < 3; i++) await qb.enqueue(cfg(`b${i}`, { priority: i }));
    for (let i = 0; i < 3; i++) await qa.enqueue(cfg(`a${i}`, { priority: i }));
    const seen: string[] = [];
    const errors: unknown[] = [];
    const w = start(
      [qa, qb, qc],
      async (job) => {
        const key = (job.config as { key: string }).key;
        seen.push(key);
        if (key === "b0") await qa.enqueue(cfg("a-late")); // arrives in the first queue while b0 runs
      },
      { concurrency: 1, blockMs: 30_000 },
    );
    w.on("error", (e: unknown) => errors.push(e));
    await waitFor(() => seen.length === 7);
    assert.deepEqual(seen, ["a0", "a1", "a2", "b0", "a-late", "b1", "b2"]);
    await sleep(300); // now blocked in one ORCA.MPOP over the three queues
    const admin = server.client();
    cleanup.push(() => admin.disconnect());
    await admin.config("RESETSTAT");
    await sleep(1500); // idle: no polling, no rotation
    assert.deepEqual([await calls(admin, "orca.pop"), await calls(admin, "orca.mpop")], [0, 0]);
    const t0 = Date.now();
    await qc.enqueue(cfg("c0")); // the last queue wakes it
    await waitFor(() => seen.length === 8);
    assert.equal(seen[7], "c0");
    assert.ok(Date.now() - t0 < 1000);
    await qb.enqueue(cfg("b-late"));
    await waitFor(() => seen.length === 9);
    assert.deepEqual(errors, []);
    await w.close();
  });

  it("jobs of the other queues finishing together are acked with one MACK per queue", async () => {
    const { r } = await own();
    const qs = ["a", "b", "c"].map((x) => new Queue(r, `{many}:${x}`));
    for (const q of qs.slice(1))
      await q.enqueueMany(Array.from({ length: 60 }, (_, i) => cfg(`${q.name}-${i}`)));
    await r.config("RESETSTAT");
    let done = 0;
    const w = start(qs, (job) => ({ n: (job.config as { key: string }).key }), {
      concurrency: 8,
      leaseMs: 60_000,
    });
    w.on("completed", () => done++);
    await waitFor(() => done === 120);
    await w.close();
    const [acks, macks] = [await calls(r, "orca.ack"), await calls(r, "orca.mack")];
    assert.ok(macks > 0 && acks + macks <= 60, `${acks} ACK, ${macks} MACK for 120 jobs of other queues`);
    for (const q of qs.slice(1)) {
      const st = await q.stats();
      assert.deepEqual([st.queued, st.leased, st.results], [0, 0, 60]);
      assert.equal(
        (await q.result((await q.enqueue(cfg(`${q.name}-0`))).key))?.toString(),
        `{"n":"${q.name}-0"}`,
      );
    }
  });

  it("a job leased by NEXT while closing is handed back, not lost", async () => {
    const { r } = await own();
    const q = new Queue(r, "stopping");
    const first = (await q.enqueue(cfg("first"))).key;
    const second = (await q.enqueue(cfg("second", { priority: 10 }))).key;
    const createdAt = (await q.status(second))!.createdAt;
    const handled: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const w = start(
      q,
      async (job) => {
        handled.push(job.key);
        await gate;
        return "done";
      },
      { concurrency: 1, leaseMs: 60_000, graceMs: 10_000 },
    );
    await waitFor(() => handled.length === 1);
    const popped = Number(/orca_popped:(\d+)/.exec(await r.info("orca"))![1]);
    await r.config("RESETSTAT");
    // Hold write commands at the server: the ACK ... NEXT waits there while the worker closes,
    // and its reply then leases "second" to a closing worker.
    await r.call("CLIENT", "PAUSE", 1500, "WRITE");
    release();
    await sleep(400);
    await w.close();
    assert.deepEqual(handled, [first]);
    assert.equal((await q.result(first))?.toString(), '"done"');
    const st = (await q.status(second))!;
    assert.deepEqual([st.state, st.immediate, st.createdAt, st.leases], ["queued", true, createdAt, []]);
    assert.equal(Number(/orca_popped:(\d+)/.exec(await r.info("orca"))![1]), popped + 1); // by the NEXT
    assert.deepEqual([await calls(r, "orca.ack"), await calls(r, "orca.pop")], [1, 0]);
    assert.deepEqual(w.counts, { completed: 1, failed: 0, lost: 0, handedBack: 1 });
  });

  it("never holds more jobs than slots", async () => {
    const { r } = await own();
    const q = new Queue(r, "slots");
    await q.enqueueMany(Array.from({ length: 60 }, (_, i) => cfg(`s${i}`)));
    const w = start(q, () => sleep(5), { concurrency: 3, leaseMs: 60_000 });
    let most = 0;
    while (w.counts.completed < 60) {
      most = Math.max(most, (await q.stats()).leased);
      await sleep(2);
    }
    assert.ok(most >= 1 && most <= 3, `${most} leased at once`);
  });

  it("failures keep their outcome and the slot is refilled", async () => {
    const { r } = await own();
    const q = new Queue(r, "failing");
    for (let i = 0; i < 10; i++) await q.enqueue(cfg(`f${i}`, { priority: i }));
    const outcomes: string[] = [];
    const w = start(
      q,
      () => {
        throw new Error("broken grader");
      },
      { concurrency: 1, nackDelayMs: 600_000 },
    );
    w.on("failed", (_j: Job, _e: Error, out: { outcome: string }) => outcomes.push(out.outcome));
    await waitFor(() => outcomes.length === 10);
    assert.deepEqual(outcomes, Array(10).fill("retry"));
    assert.equal((await q.stats()).delayed, 10);
  });

  it("a result over orca.max-payload-bytes in a MACK batch fails only its own job", async () => {
    const { r } = await own();
    await r.config("SET", "orca.max-payload-bytes", "1000");
    const q = new Queue(r, "batch");
    await q.enqueueMany(Array.from({ length: 8 }, (_, i) => cfg(`b${i}`)));
    const failed: unknown[] = [];
    let release!: () => void;
    const together = new Promise<void>((res) => (release = res));
    const w = start(
      q,
      async (job) => {
        await together; // all eight finish in one turn: one batch
        return (job.config as { key: string }).key === "b3" ? "x".repeat(5000) : "ok";
      },
      { concurrency: 8, leaseMs: 60_000, nackDelayMs: 60_000 },
    );
    w.on("failed", (_j: Job, err: unknown) => failed.push(err));
    await waitFor(async () => (await q.stats()).leased === 8);
    release();
    await waitFor(() => failed.length === 1 && w.counts.completed === 7, 5000);
    await w.close();
    assert.ok(failed[0] instanceof ResultTooLargeError);
    assert.ok((await calls(r, "orca.mack")) >= 1);
    assert.equal((await q.stats()).delayed, 1);
  });

  for (const shape of ["ACK ... NEXT", "plain ACK", "a second queue's ACK"] as const) {
    it(`a result over orca.max-payload-bytes is a failure (${shape}) and the worker goes on`, async () => {
      const { r } = await own();
      await r.config("SET", "orca.max-payload-bytes", "1000");
      const q = new Queue(r, "big");
      const other = new Queue(r, "first");
      const big = (await q.enqueue(cfg("big"))).key;
      const small = (await q.enqueue(cfg("small", { priority: 10 }))).key;
      const failed: [string, unknown, NackOutcome][] = [];
      const w = start(
        shape === "a second queue's ACK" ? [other, q] : q,
        (job) => ((job.config as { key: string }).key === "big" ? "x".repeat(5000) : "ok"),
        { concurrency: 1, leaseMs: 60_000, nackDelayMs: 60_000, ackNext: shape !== "plain ACK" },
      );
      w.on("failed", (job: Job, err: unknown, out: NackOutcome) => failed.push([job.key, err, out]));
      await waitFor(() => failed.length === 1 && w.counts.completed === 1, 5000);
      await w.close();
      const [key, err, out] = failed[0]!;
      assert.equal(key, big);
      assert.ok(err instanceof ResultTooLargeError && err instanceof InvalidArgumentError);
      assert.match(err.message, /orca\.max-payload-bytes/);
      assert.equal(out.outcome, "retry");
      assert.equal((await q.status(big))?.state, "delayed");
      assert.equal((await q.result(small))?.toString(), '"ok"');
      assert.deepEqual(w.counts, { completed: 1, failed: 1, lost: 0, handedBack: 0 });
    });
  }
});

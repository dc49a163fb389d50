import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { Job, NackOutcome, Queue, Worker, WorkerOptions, blockingConnection, run } from "../src";
import * as P from "../src/protocol";
import { Server, cfg, qname, waitFor } from "./server";

let server: Server;
let r: Redis;
const workers: Worker[] = [];
before(async () => {
  server = await Server.start();
  r = server.client();
});
after(async () => {
  await Promise.all(workers.map((w) => w.close({ graceMs: 0 })));
  r.disconnect();
  server.stop();
});

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
function start(q: Queue | Queue[], handler: (job: Job) => unknown, opts: WorkerOptions = {}): Worker {
  const w = new Worker(q, handler, { handleSignals: false, logger: quiet, ...opts });
  workers.push(w);
  return w;
}
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

describe("Worker", () => {
  it("acks with results and emits completed", async () => {
    const q = new Queue(r, qname());
    const keys: string[] = [];
    for (let i = 0; i < 60; i++) keys.push((await q.enqueue(cfg(`k${i}`, { n: i }))).key);
    const done: string[] = [];
    const w = start(q, (job) => ({ double: (job.config as { n: number }).n * 2 }), { concurrency: 4 });
    w.on("completed", (job: Job) => done.push(job.key));
    await waitFor(() => done.length === 60);
    assert.deepEqual([...done].sort(), [...keys].sort());
    for (const [i, k] of keys.entries())
      assert.deepEqual(JSON.parse((await q.result(k))!.toString()), { double: 2 * i });
    await w.close();
    assert.equal(w.counts.completed, 60);
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased], [0, 0]);
  });

  it("nacks a failure, keeps the error text, and the retry succeeds", async () => {
    const q = new Queue(r, qname());
    const key = (await q.enqueue(cfg("flaky"))).key;
    const failures: [string, NackOutcome][] = [];
    const seen: number[] = [];
    const w = start(
      q,
      async (job) => {
        seen.push(job.attempt!);
        if (job.attempt === 1) throw new Error("compiler crashed");
        return Buffer.from("ok");
      },
      { nackDelayMs: 0 },
    );
    w.on("failed", (_job: Job, err: Error, out: NackOutcome) => failures.push([err.message, out]));
    await waitFor(async () => (await q.result(key))?.toString() === "ok");
    assert.deepEqual(seen, [1, 2]);
    assert.equal(failures[0]![0], "compiler crashed");
    assert.equal(failures[0]![1].outcome, "retry");
  });

  it("keeps no result for undefined, and null as JSON", async () => {
    const q = new Queue(r, qname());
    const none = (await q.enqueue(cfg("none"))).key;
    const nul = (await q.enqueue(cfg("null", { priority: 5 }))).key;
    const w = start(q, (job) => ((job.config as { key: string }).key === "null" ? null : undefined));
    await waitFor(() => w.counts.completed === 2);
    assert.equal(await q.result(none), null);
    assert.equal((await q.result(nul))?.toString(), "null");
  });

  it("treats a result that cannot be JSON as a failure", async () => {
    const q = new Queue(r, qname());
    const key = (await q.enqueue(cfg("odd"))).key;
    const failed: string[] = [];
    const w = start(q, () => ({ big: 1n }), { nackDelayMs: 60_000 });
    w.on("failed", (_job: Job, err: Error) => failed.push(err.message));
    await waitFor(() => failed.length === 1);
    assert.match(failed[0]!, /BigInt/);
    assert.equal((await q.status(key))?.state, "delayed");
  });

  it("keeps a long job alive with heartbeats", async () => {
    const q = new Queue(r, qname());
    const key = (await q.enqueue(cfg("long"))).key;
    let calls = 0;
    start(
      q,
      async () => {
        calls++;
        await sleep(3000);
        return "finished";
      },
      { leaseMs: 1000, concurrency: 2 },
    );
    await waitFor(async () => (await q.result(key)) !== null, 20_000);
    assert.equal(calls, 1);
  });

  it("drops the result of a cancelled job and aborts its signal", async () => {
    const q = new Queue(r, qname());
    const key = (await q.enqueue(cfg("doomed"))).key;
    let began = false;
    let aborted = false;
    let release!: () => void;
    const w = start(
      q,
      async (job) => {
        began = true;
        job.signal.addEventListener("abort", () => (aborted = true));
        await new Promise<void>((res) => (release = res));
        return "late";
      },
      { leaseMs: 1500 },
    );
    const lost: string[] = [];
    w.on("lost", (_j: Job, why: string) => lost.push(why));
    await waitFor(() => began);
    await q.delete(key);
    await waitFor(() => lost.length === 1);
    assert.deepEqual(lost, ["job was cancelled"]);
    assert.ok(aborted);
    release();
    await sleep(200);
    assert.equal(await q.result(key), null);
    assert.equal(w.counts.completed, 0);
  });

  it("close() hands back unfinished jobs at their arrival time", async () => {
    const q = new Queue(r, qname());
    const fast = (await q.enqueue(cfg("fast", { collation: { type: "user", id: "1" } }))).key;
    const slow = (await q.enqueue(cfg("slow", { collation: { type: "user", id: "2" }, priority: 10 }))).key;
    const createdAt = (await q.status(slow))!.createdAt;
    const handled: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const w = start(
      q,
      async (job) => {
        handled.push(job.key);
        if (job.key === slow) await gate;
        return "ok";
      },
      { concurrency: 2, graceMs: 300 },
    );
    await waitFor(() => handled.length === 2);
    const t0 = Date.now();
    await w.close();
    const took = Date.now() - t0;
    assert.ok(took >= 250 && took < 5000, `close took ${took} ms`);
    release();
    assert.equal((await q.result(fast))?.toString(), '"ok"');
    const st = (await q.status(slow))!;
    assert.deepEqual(
      [st.state, st.immediate, st.createdAt, st.leases.length],
      ["queued", true, createdAt, 0],
    );
    assert.equal(w.counts.handedBack, 1);
    await sleep(200);
    assert.equal(await q.result(slow), null);
  });

  it("close() wakes a blocking pop at once", async () => {
    const q = new Queue(r, qname());
    const w = start(q, () => undefined, { blockMs: 30_000 });
    await sleep(500);
    const t0 = Date.now();
    await w.close();
    assert.ok(Date.now() - t0 < 2000);
  });

  // The id of `w`'s blocking connection while a pop blocks on it (else undefined).
  async function blockedOn(w: Worker): Promise<string | undefined> {
    const pending = (w as unknown as { blockerId?: Promise<number> }).blockerId;
    if (pending === undefined) return undefined;
    const id = String(await pending);
    const list = String(await r.call("CLIENT", "LIST"));
    const line = list.split("\n").find((l) => l.startsWith(`id=${id} `));
    return line?.includes("cmd=orca.pop") ? id : undefined;
  }

  // A worker blocked on an empty queue (BLOCK 30 s), and its blocking connection's id.
  async function blockedWorker(): Promise<[Worker, string]> {
    const w = start(new Queue(r, qname()), () => undefined, { blockMs: 30_000 });
    let id: string | undefined;
    await waitFor(async () => (id = await blockedOn(w)) !== undefined);
    return [w, id ?? ""];
  }

  // Runs `during` (if any) while close() is under way; close() must be done within 2 s.
  async function closesPromptly(w: Worker, during?: () => Promise<unknown>): Promise<void> {
    const t0 = Date.now();
    const closing = w.close();
    await during?.();
    await closing;
    assert.ok(Date.now() - t0 < 2000, `close() took ${Date.now() - t0} ms`);
  }

  it("close() wakes a blocking pop whose connection became ready after its CLIENT ID was asked", async () => {
    const [w] = await blockedWorker();
    // A "ready" event that comes after the id was asked (the first connection's own, late)
    // must not make the worker forget the id it has.
    (w as unknown as { blocker: Redis }).blocker.emit("ready");
    await closesPromptly(w);
  });

  it("close() wakes a blocking pop after its connection was killed and came back", async () => {
    const [w, before] = await blockedWorker();
    assert.equal(Number(await r.call("CLIENT", "KILL", "ID", before)), 1);
    // The worker reconnects and blocks again, on a connection with another id.
    await waitFor(async () => {
      const now = await blockedOn(w);
      return now !== undefined && now !== before;
    });
    await closesPromptly(w);
  });

  it("close() is not held up by a slow CLIENT UNBLOCK once the blocking pop is back", async () => {
    // Against a server going away, the command connection retries UNBLOCK for seconds while
    // the blocking pop has already failed.
    const [w, blocked] = await blockedWorker();
    (w as unknown as { unblock: () => Promise<boolean> }).unblock = () =>
      new Promise((res) => setTimeout(() => res(false), 5000));
    await closesPromptly(w, async () => {
      await sleep(200);
      await r.call("CLIENT", "KILL", "ID", blocked); // the pop fails, as if the server went
    });
  });

  it("blocks instead of polling an empty queue", async () => {
    const own = await Server.start(); // a server of its own: count one idle worker's pops
    const c = own.client();
    const q = new Queue(c, qname());
    const w = start(q, () => undefined, { concurrency: 8, blockMs: 5000 });
    await sleep(1000);
    const stats = (await c.info("commandstats")).split("\n").find((l) => l.startsWith("cmdstat_orca.pop:"));
    const calls = Number(/calls=(\d+)/.exec(stats ?? "")?.[1] ?? 0);
    assert.ok(calls >= 1 && calls <= 4, `ORCA.POP called ${calls} times in 1 s`);
    await w.close();
    c.disconnect();
    own.stop();
  });

  it("a blocked worker wakes on enqueue", async () => {
    const q = new Queue(r, qname());
    let got = 0;
    start(q, () => (got = Date.now()), { blockMs: 30_000 });
    await sleep(300);
    const t0 = Date.now();
    await q.enqueue(cfg("wake"));
    await waitFor(() => got > 0);
    assert.ok(got - t0 < 1000);
  });

  it("serves several queues", async () => {
    const n = qname();
    const qa = new Queue(r, `${n}-a`);
    const qb = new Queue(r, `${n}-b`);
    const done: string[] = [];
    const w = start([qa, qb], (job) => job.queue);
    w.on("completed", (_j: Job, res: string) => done.push(res));
    await qb.enqueue(cfg("b1"));
    await waitFor(() => done.length === 1);
    await qa.enqueue(cfg("a1"));
    await waitFor(() => done.length === 2);
    assert.deepEqual(done, [qb.name, qa.name]);
    assert.throws(
      () => new Worker([qa, new Queue(server.client({ lazyConnect: true }), "x")], () => 1),
      RangeError,
    );
  });

  it("is unaffected by a short commandTimeout on the user's client", async () => {
    const c = server.client({ commandTimeout: 200 });
    const q = new Queue(c, qname());
    const done: string[] = [];
    const w = start(q, (job) => done.push(job.key), { blockMs: 1000 });
    await sleep(1500); // several blocking pops longer than the client's timeout
    const key = (await q.enqueue(cfg("x"))).key;
    await waitFor(() => done.length === 1);
    assert.equal(done[0], key);
    await w.close();
    c.disconnect();
  });

  it("validates every numeric option", () => {
    const q = new Queue(r, qname());
    const bad: [WorkerOptions, RegExp][] = [
      [{ concurrency: 0 }, /^concurrency must be an integer >= 1$/],
      [{ concurrency: 1.5 }, /^concurrency must be an integer >= 1$/],
      [{ leaseMs: 999 }, /^leaseMs must be an integer >= 1000/],
      [{ leaseMs: NaN }, /^leaseMs must be an integer >= 1000/],
      [{ leaseMs: 1500.5 }, /^leaseMs must be an integer >= 1000/],
      [{ blockMs: 0 }, /^blockMs must be an integer >= 1/],
      [{ blockMs: 0.5 }, /^blockMs must be an integer >= 1/],
      [{ graceMs: -1 }, /^graceMs must be >= 0$/],
      [{ graceMs: NaN }, /^graceMs must be >= 0$/],
      [{ graceMs: Infinity }, /^graceMs must be at most 2147483647/],
      [{ heartbeatMs: 0 }, /^heartbeatMs must be between 0 and leaseMs$/],
      [{ heartbeatMs: NaN }, /^heartbeatMs must be between 0 and leaseMs$/],
      [{ resultTtlMs: -1 }, /^resultTtlMs must be an integer >= 0$/],
      [{ resultTtlMs: 1.5 }, /^resultTtlMs must be an integer >= 0$/],
      [{ nackDelayMs: -1 }, /^nackDelayMs must be an integer >= 0$/],
      [{ nackDelayMs: "5" as unknown as number }, /^nackDelayMs must be an integer >= 0$/],
    ];
    for (const [opts, message] of bad)
      assert.throws(
        () => new Worker(q, () => undefined, { handleSignals: false, autorun: false, ...opts }),
        (e: unknown) => e instanceof RangeError && message.test(e.message),
        JSON.stringify(opts),
      );
    const w = new Worker(q, () => undefined, {
      handleSignals: false,
      autorun: false,
      graceMs: 0,
      resultTtlMs: 0,
      nackDelayMs: 0,
    });
    return w.close(); // the lowest values are accepted
  });

  it("never re-sends a blocking pop after its connection dies", async () => {
    const q = new Queue(r, qname());
    const blocker = blockingConnection(r);
    const id = Number(await blocker.call("CLIENT", "ID"));
    const popped = run(blocker, P.pop(q.name, { leaseMs: 60000, blockMs: 5000 })).then(
      () => "resolved",
      () => "rejected",
    );
    await sleep(300);
    await r.call("CLIENT", "KILL", "ID", id);
    assert.equal(await popped, "rejected");
    const key = (await q.enqueue(cfg("after"))).key;
    await sleep(500); // a re-sent pop would have leased it by now
    assert.equal((await q.status(key))?.state, "queued");
    blocker.disconnect();
  });
});

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { Forward, Job, LeaseLostError, Queue, Worker } from "../src";
import { Server, cfg, qname, waitFor } from "./server";

// Hand-offs from the client: ack(..., { forward }) and nack(..., { forward }).
let server: Server;
let r: Redis;
before(async () => {
  server = await Server.start("max-attempts", "2", "retry-base", "1");
  r = server.client();
});
after(() => {
  r.disconnect();
  server.stop();
});

describe("hand-offs", () => {
  it("acks and enqueues the successor in one step", async () => {
    const tag = qname();
    const compile = new Queue(r, `{${tag}}:compile`);
    const test = new Queue(r, `{${tag}}:test`);
    await compile.enqueue(cfg("sub-41"));
    const job = await compile.pop({ leaseMs: 60_000 });
    assert.ok(job);
    const succ = await compile.ack(job, {
      result: { built: true },
      forward: { queue: test, config: cfg("sub-41", { stage: "test" }) },
    });
    assert.equal(succ.created, true);
    assert.equal(succ.key, job.key);
    const done = await compile.status(job.key); // finished, its result kept
    assert.equal(done?.state, "done");
    assert.ok(done?.finishedAt);
    const st = await test.status(job.key);
    assert.equal(st?.state, "queued");
    assert.deepEqual((st?.config as { stage: string }).stage, "test");
    // A refused ACK forwards nothing.
    await assert.rejects(
      compile.ack(job, { forward: { queue: test, config: cfg("other") } }),
      LeaseLostError,
    );
    assert.equal(await test.len(), 1);
  });

  it("nacks and forwards only when the job dies", async () => {
    const q = new Queue(r, qname());
    const failures = `${q.name}:failures`;
    await q.enqueue(cfg("a"));
    let job = await q.pop({ leaseMs: 60_000 });
    assert.ok(job);
    const first = await q.nack(job, { delayMs: 0, forward: { queue: failures, config: cfg("report-a") } });
    assert.equal(first.outcome, "retry");
    assert.equal(first.successor, undefined);
    job = await q.pop({ leaseMs: 60_000 });
    assert.ok(job);
    const dead = await q.nack(job, { forward: { queue: failures, config: cfg("report-a") } });
    assert.equal(dead.outcome, "dead");
    assert.equal(dead.successor?.created, true);
    assert.equal(await new Queue(r, failures).len(), 1);
  });

  it("a Worker's handler hands its job on by resolving to a Forward", async () => {
    const tag = qname();
    const a = new Queue(r, `{${tag}}:a`);
    const b = `{${tag}}:b`;
    for (let i = 0; i < 5; i++) await a.enqueue(cfg(`j${i}`));
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    const w = new Worker(
      a,
      (job: Job) => new Forward(b, { ...(job.config as object), stage: "b" }, { ok: true }),
      {
        handleSignals: false,
        logger: quiet,
        concurrency: 2,
      },
    );
    const next = new Queue(r, b);
    await waitFor(async () => (await next.len()) === 5);
    await w.close();
    const st = await a.stats();
    assert.deepEqual([st.queued, st.leased], [0, 0]);
    const one = await next.pop({ leaseMs: 1000 });
    assert.equal((one?.config as { stage: string }).stage, "b");
    assert.deepEqual(JSON.parse(String(await a.result(one!.key))), { ok: true });
  });
});

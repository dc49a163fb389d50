import assert from "node:assert/strict";
import { hostname } from "node:os";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { Job, MAX_ERROR_CHARS, Queue, Worker, errorArg, errorText, workerName } from "../src";
import { Server, cfg, qname, waitFor } from "./server";

// Why a job failed and who runs it: nack's `error` and pops' `worker`, and the Worker sending
// its name (host:pid[:name]) and the handler's rejection, read back through STATUS and LIST.

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

describe("failure texts and worker names", () => {
  it("nack keeps the error; a pop names its worker", async () => {
    const q = new Queue(r, qname());
    const key = (await q.enqueue(cfg("sub-1"))).key;
    const job = await q.pop({ leaseMs: 60_000, worker: "grader-7" });
    assert.ok(job);
    let st = await q.status(key);
    assert.equal(st?.state, "leased");
    assert.equal(st?.worker, "grader-7");
    assert.ok((st?.startedAt ?? 0) > 0);
    assert.deepEqual(
      st?.leases.map((l) => [l.lease, l.worker]),
      [[job.lease, "grader-7"]],
    );
    const out = await q.nack(job, { delayMs: 60_000, error: "AssertionError: expected 4, got 5" });
    assert.equal(out.outcome, "retry");
    st = await q.status(key);
    assert.equal(st?.state, "delayed");
    assert.equal(st?.error, "AssertionError: expected 4, got 5");
  });

  it("cuts long errors and names workers", () => {
    assert.equal(errorArg(undefined), undefined);
    assert.equal(errorArg("short"), "short");
    const long = errorArg("x".repeat(MAX_ERROR_CHARS * 2))!;
    assert.equal(Array.from(long).length, MAX_ERROR_CHARS);
    assert.ok(long.endsWith("\u2026"));
    assert.equal(workerName(), `${hostname()}:${process.pid}`);
    assert.equal(workerName("w1"), `${hostname()}:${process.pid}:w1`);
    assert.equal(errorText(new RangeError("bad")), "RangeError: bad");
    assert.equal(errorText("plain"), "plain");
  });

  it("the Worker sends its name and the rejection's text", async () => {
    const q = new Queue(r, qname());
    let release: () => void = () => {};
    const gate = new Promise<void>((res) => (release = res));
    const slow = (await q.enqueue(cfg("slow"))).key;
    const bad = (await q.enqueue(cfg("bad"))).key;
    const w = new Worker(
      q,
      async (job: Job) => {
        if (job.key === bad) throw new TypeError("test 3 timed out");
        await gate;
        return "ok";
      },
      { handleSignals: false, logger: quiet, concurrency: 2, nackDelayMs: 60_000, name: "box-2" },
    );
    workers.push(w);
    assert.equal(w.name, `${hostname()}:${process.pid}:box-2`);
    await waitFor(async () => (await q.status(bad))?.state === "delayed");
    assert.equal((await q.status(bad))?.error, "TypeError: test 3 timed out");
    const running = await q.status(slow);
    assert.equal(running?.state, "leased");
    assert.equal(running?.worker, w.name);
    release();
    await waitFor(async () => (await q.result(slow))?.toString() === '"ok"');
    await w.close();
  });
});

/**
 * `handleSignals` in a real process: SIGTERM closes the worker (grace, then hand-back), the
 * process exits by itself only once the handlers still running have settled (so they should
 * honour `job.signal`), and a second signal skips what is left of the grace.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { Queue } from "../src";
import { Server, cfg, qname, waitFor } from "./server";

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

interface Child {
  proc: ChildProcess;
  log: string[];
  exited: Promise<number | null>;
  exitedAt: number;
}

function spawnWorker(name: string, graceMs: number, mode: "stubborn" | "polite"): Child {
  const proc = spawn(
    process.execPath,
    [join(__dirname, "signal-worker.js"), String(server.port), name, String(graceMs), mode],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const child = { proc, log: [] as string[], exitedAt: 0 } as Child;
  proc.stderr!.on("data", (d: Buffer) => child.log.push(...d.toString().split("\n").filter(Boolean)));
  child.exited = new Promise((res) =>
    proc.on("exit", (code) => {
      child.exitedAt = Date.now();
      res(code);
    }),
  );
  return child;
}

async function started(q: Queue, mode: "stubborn" | "polite", graceMs: number) {
  const key = (await q.enqueue(cfg("job"))).key;
  const child = spawnWorker(q.name, graceMs, mode);
  await waitFor(() => child.log.includes("started"));
  return { key, child };
}

describe("handleSignals", () => {
  it("SIGTERM: hands back after the grace; the process exits once the handler settles", async () => {
    const q = new Queue(r, qname());
    const { key, child } = await started(q, "stubborn", 300);
    const t0 = Date.now();
    child.proc.kill("SIGTERM");
    await waitFor(() => child.log.includes("closed"));
    const closed = Date.now() - t0;
    assert.ok(closed >= 250 && closed < 1500, `closed after ${closed} ms`);
    assert.equal((await q.status(key))?.state, "queued"); // handed back
    assert.equal(child.proc.exitCode, null); // still running: its handler has not settled
    assert.equal(await child.exited, 0);
    assert.ok(child.exitedAt - t0 >= 1500, `exited after ${child.exitedAt - t0} ms`);
    assert.deepEqual(child.log, ["started", "closed", "settled"]);
  });

  it("a handler that honours job.signal lets the process exit right after the close", async () => {
    const q = new Queue(r, qname());
    const { child } = await started(q, "polite", 300);
    const t0 = Date.now();
    child.proc.kill("SIGTERM");
    assert.equal(await child.exited, 0);
    assert.ok(child.exitedAt - t0 < 1500, `exited after ${child.exitedAt - t0} ms`);
    assert.deepEqual(child.log.slice(0, 1), ["started"]);
    assert.ok(child.log.includes("settled") && child.log.includes("closed"));
  });

  it("a second signal skips what is left of the grace", async () => {
    const q = new Queue(r, qname());
    const { key, child } = await started(q, "polite", 30_000);
    const t0 = Date.now();
    child.proc.kill("SIGTERM");
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(child.proc.exitCode, null); // in the grace period
    child.proc.kill("SIGINT");
    assert.equal(await child.exited, 0);
    assert.ok(child.exitedAt - t0 < 3000, `exited after ${child.exitedAt - t0} ms`);
    assert.equal((await q.status(key))?.state, "queued"); // handed back
  });
});

/**
 * Chaos: several worker processes, some SIGKILLed mid-job, one stopped with SIGTERM. Every
 * job must end completed exactly once: one successful ACK per job (the server counts them),
 * each with its result, no completion reported twice, nothing left queued/leased/dead.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { it } from "node:test";

import type Redis from "ioredis";

import { Queue } from "../src";
import { Server } from "./server";

const JOBS = 200;
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

function spawnWorker(port: number, name: string): ChildProcess & { log: string } {
  const p = spawn(process.execPath, [join(__dirname, "chaos-worker.js"), String(port), name], {
    stdio: ["ignore", "ignore", "pipe"],
  }) as ChildProcess & { log: string };
  p.log = "";
  p.stderr!.on("data", (d: Buffer) => (p.log += d.toString()));
  return p;
}

/**
 * Waits until worker `p` has started a job: past its start-up (which takes seconds on a loaded
 * machine), its signal handlers installed, holding leases.
 */
async function busy(r: Redis, name: string, p: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await r.llen(`${name}:started:${p.pid}`)) === 0) {
    assert.ok(p.exitCode === null && p.signalCode === null, `worker ${p.pid} exited`);
    assert.ok(Date.now() < deadline, `worker ${p.pid} never started a job`);
    await sleep(10);
  }
}

async function orcaInfo(server: Server): Promise<Record<string, number>> {
  const c = server.client();
  const text = await c.info("orca");
  c.disconnect();
  return Object.fromEntries(
    text
      .split("\n")
      .filter((l) => l.includes(":"))
      .map((l) => [l.split(":")[0]!, Number(l.split(":")[1])]),
  );
}

it(
  "workers killed mid-job and one stopped with SIGTERM: every job done exactly once",
  { timeout: 120_000 },
  async () => {
    const server = await Server.start();
    const procs: (ChildProcess & { log: string })[] = [];
    const r = server.client();
    try {
      const q = new Queue(r, "chaos");
      const keys: string[] = [];
      for (let i = 0; i < JOBS; i++) {
        const sleepMs = i % 40 === 0 ? 1500 : 200 + ((i * 7919) % 300);
        keys.push((await q.enqueue({ key: `job-${i}`, response_url: "", sleep_ms: sleepMs })).key);
      }
      const ackedBefore = (await orcaInfo(server)).orca_acked!;
      for (let i = 0; i < 4; i++) procs.push(spawnWorker(server.port, "chaos"));
      await busy(r, "chaos", procs[0]!);
      procs[0]!.kill("SIGKILL"); // mid-job: its leases expire and come back
      await busy(r, "chaos", procs[1]!);
      await sleep(200);
      procs[1]!.kill("SIGKILL");
      procs.push(spawnWorker(server.port, "chaos"));
      await busy(r, "chaos", procs[2]!);
      await sleep(200);
      const term = procs[2]!;
      const exited = new Promise<number | null>((res) => term.once("exit", (code) => res(code)));
      term.kill("SIGTERM");
      assert.equal(await exited, 0);
      assert.match(term.log, /worker stopped/);
      assert.doesNotMatch(term.log, /"handedBack":0\}/, term.log); // it was busy: jobs were handed back

      const deadline = Date.now() + 90_000;
      for (;;) {
        const st = await q.stats();
        if (st.queued === 0 && st.leased === 0 && st.delayed === 0) break;
        assert.ok(Date.now() < deadline, `jobs left: ${JSON.stringify(st)}`);
        await sleep(200);
      }
      for (const k of keys) {
        const res = await q.result(k);
        assert.ok(res, `job ${k} has no result`);
        assert.deepEqual(Object.keys(JSON.parse(res.toString())).sort(), ["lease", "pid"]);
      }
      assert.equal((await q.stats()).dead, 0);
      const info = await orcaInfo(server);
      assert.equal(info.orca_acked! - ackedBefore, JOBS); // one successful ACK per job
      assert.ok(info.orca_expired! > 0); // the killed workers' leases did expire
      const done = await r.lrange("chaos:done", 0, -1);
      assert.equal(new Set(done).size, done.length); // no completion reported twice
      await q.check();
    } finally {
      for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
      r.disconnect();
      server.stop();
    }
  },
);

#!/usr/bin/env node
// One Node side of the worker bench (benches/clients/py/run.py runs it; see README.md):
//
//   node side.js fill    node|bull --port P --queue Q --n N [--tag T]
//   node side.js produce node|bull --port P --queue Q --n N --rate R   (open loop, "ts" in each job)
//   node side.js rush    node|bull --port P --queue Q --n N --students S --window W
//   node side.js worker  node|bull --port P --queue Q --expect N --concurrency C [--warmup W]
//
// node: clients/node's Queue and Worker (orca-queue); bull: BullMQ 5. Jobs are the ~1 KB
// config of benches/job.json, as bench.js and the Python sides build it. `ts` is
// CLOCK_MONOTONIC in µs (process.hrtime), the clock Python's time.monotonic_ns reads.
// A worker prints READY once started, then one JSON line once it has finished --expect jobs;
// a producer prints one JSON line. `--warmup W` first drains W jobs of a queue of its own in
// the same process (a fresh V8 runs the first few hundred thousand jobs partly unoptimized;
// bench.js's README says more), and reports only the measured queue.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const ROOT = path.resolve(__dirname, "../..");
const ORCA = require(path.join(ROOT, "clients/node/build/src"));
const IORedis = require("ioredis");

const argv = process.argv.slice(2);
const [action, side] = argv;
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const PORT = Number(opt("port"));
const QUEUE = opt("queue", "q");
const TAG = Number(opt("tag", 1));
const conn = { host: "127.0.0.1", port: PORT };
const TEMPLATE = fs.readFileSync(path.join(ROOT, "benches/job.json"), "utf8").trim();

const monoUs = () => Number(process.hrtime.bigint() / 1000n);
const cpuS = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function config(i, tag, students = 0, ts = undefined, warm = false) {
  const parts = TEMPLATE.split("__rand_int__");
  let out = parts[0];
  for (let k = 1; k < parts.length; k++) {
    const n = k === 2 ? (students ? i % students : Math.floor(i / 4)) : tag * 1e9 + i;
    out += String(n).padStart(12, "0") + parts[k];
  }
  const cfg = JSON.parse(out);
  if (ts !== undefined) cfg.ts = ts;
  if (warm) cfg.warm = 1; // of the producer's first fifth: its latency is not recorded
  return cfg;
}

function percentiles(xs) {
  if (xs.length === 0) return null;
  const v = Float64Array.from(xs).sort();
  const rank = (p) => v[Math.min(v.length - 1, Math.max(0, Math.round(p * v.length + 0.5) - 1))] / 1000;
  return { p50: rank(0.5), p99: rank(0.99), p999: rank(0.999), max: v[v.length - 1] / 1000 };
}

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const result = (cfg) => ({ ok: true, key: cfg.key.length });

function tally(expect) {
  const t = { expect, done: 0, lat: [], tStart: monoUs(), tLast: 0 };
  t.promise = new Promise((res) => (t.resolve = res));
  t.started = (cfg) => {
    if (cfg.ts !== undefined && cfg.warm === undefined) t.lat.push(monoUs() - cfg.ts);
  };
  t.finished = () => {
    if (++t.done === t.expect) {
      t.tLast = monoUs();
      t.resolve();
    }
  };
  t.report = (cpu, extra = {}) => {
    const wall = (t.tLast - t.tStart) / 1e6;
    return { jobs: t.done, wall, rate: t.done / wall, cpu_us_per_job: (cpu * 1e6) / t.done, t_last: t.tLast,
      lat: percentiles(t.lat), ...extra };
  };
  return t;
}

// --- producers ---------------------------------------------------------------------------------
async function bullQueue(name) {
  const { Queue } = require("bullmq");
  const q = new Queue(name, { connection: conn });
  await q.waitUntilReady();
  return q;
}

async function fill(n) {
  if (side === "bull") {
    const q = await bullQueue(QUEUE);
    for (let i = 0; i < n; i += 1000) {
      const batch = [];
      for (let k = i; k < Math.min(i + 1000, n); k++) batch.push({ name: "grade", data: config(k, TAG), opts: { priority: 1 + (k % 100) } });
      await q.addBulk(batch);
    }
    await q.close();
    return;
  }
  const client = new IORedis(conn);
  const q = new ORCA.Queue(client, QUEUE);
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let k = i; k < Math.min(i + 1000, n); k++) batch.push(config(k, TAG));
    const bad = (await q.enqueueMany(batch)).find((x) => x instanceof Error);
    if (bad) throw bad;
  }
  client.disconnect();
}

// Open loop: every ~0.5 ms the jobs due by then are sent (not awaited one by one).
async function produce(n, rate) {
  const bull = side === "bull" ? await bullQueue(QUEUE) : null;
  const client = bull ? null : new IORedis(conn);
  const orca = bull ? null : new ORCA.Queue(client, QUEUE);
  const pending = [];
  const t0 = performance.now();
  let sent = 0;
  let lag = 0;
  while (sent < n) {
    const now = performance.now();
    const due = Math.min(n, Math.floor(((now - t0) / 1000) * rate) + 1);
    if (due > sent) {
      lag = Math.max(lag, now - (t0 + (sent / rate) * 1000));
      const ts = monoUs();
      for (let i = sent; i < due; i++) {
        const cfg = config(i, TAG, 0, ts, i < n / 5);
        pending.push(bull ? bull.add("grade", cfg, { priority: 1 + (i % 100) }) : orca.enqueue(cfg));
      }
      sent = due;
    }
    await new Promise((r) => setTimeout(r, 0.5));
  }
  const wall = (performance.now() - t0) / 1000;
  await Promise.all(pending);
  if (bull) await bull.close();
  else client.disconnect();
  return { sent, rate: sent / wall, lag_ms: lag };
}

// The deadline rush: n jobs from `students` students, `window` enqueues in flight, each timed.
async function rush(n, students, window) {
  const bull = side === "bull" ? await bullQueue(QUEUE) : null;
  const client = bull ? null : new IORedis(conn);
  const orca = bull ? null : new ORCA.Queue(client, QUEUE);
  const lat = [];
  const tStart = monoUs();
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const i = next++;
      const cfg = config(i, TAG, students);
      const t = monoUs();
      if (bull) await bull.add("grade", cfg, { priority: 1 + (i % 100) });
      else await orca.enqueue(cfg);
      lat.push(monoUs() - t);
    }
  };
  await Promise.all(Array.from({ length: window }, lane));
  const tEnd = monoUs();
  if (bull) await bull.close();
  else client.disconnect();
  return { t_start: tStart, enqueue_s: (tEnd - tStart) / 1e6, enqueue: percentiles(lat) };
}

// --- workers -----------------------------------------------------------------------------------
async function orcaDrain(client, name, expect, concurrency, t) {
  const w = new ORCA.Worker(new ORCA.Queue(client, name), async (job) => {
    const cfg = job.config;
    t.started(cfg);
    return result(cfg);
  }, { concurrency, leaseMs: 600_000, handleSignals: false });
  w.on("completed", t.finished);
  return w;
}

async function worker(expect, concurrency, warmup) {
  if (side === "bull") {
    const { Worker } = require("bullmq");
    const t = tally(expect);
    const cpu0 = cpuS();
    const w = new Worker(QUEUE, async (job) => {
      t.started(job.data);
      return result(job.data);
    }, { connection: { ...conn, maxRetriesPerRequest: null }, concurrency });
    w.on("completed", t.finished);
    process.stdout.write("READY\n");
    await t.promise;
    const cpu = cpuS() - cpu0;
    await w.close();
    return t.report(cpu, { setting: `concurrency ${concurrency}` });
  }
  const client = new IORedis(conn);
  if (warmup > 0) {
    const name = `${QUEUE}-warmup`;
    const q = new ORCA.Queue(client, name);
    for (let i = 0; i < warmup; i += 1000) {
      const batch = [];
      for (let k = i; k < Math.min(i + 1000, warmup); k++) batch.push(config(k, TAG + 7777));
      await q.enqueueMany(batch);
    }
    const wt = tally(warmup);
    const w = await orcaDrain(client, name, warmup, concurrency, wt);
    await wt.promise;
    await w.close();
    await client.del(name);
  }
  const t = tally(expect);
  const cpu0 = cpuS();
  const w = await orcaDrain(client, QUEUE, expect, concurrency, t);
  process.stdout.write("READY\n");
  await t.promise;
  const cpu = cpuS() - cpu0;
  await w.close();
  client.disconnect();
  return t.report(cpu, { counts: w.counts, warmup });
}

async function main() {
  let out;
  if (action === "fill") out = await fill(Number(opt("n")));
  else if (action === "produce") out = await produce(Number(opt("n")), Number(opt("rate")));
  else if (action === "rush") out = await rush(Number(opt("n")), Number(opt("students", 2000)), Number(opt("window", 64)));
  else if (action === "worker") out = await worker(Number(opt("expect")), Number(opt("concurrency", 16)), Number(opt("warmup", 0)));
  else throw new Error(`unknown action ${action}`);
  if (out !== undefined) emit(out);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);

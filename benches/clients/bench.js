#!/usr/bin/env node
// `make bench-clients`: the full job cycle of BullMQ 5 against this project's Node client
// (clients/node, orca-queue), side by side in ONE run against ONE redis-server with the
// Orca module loaded (BullMQ needs no module), with the same kind of client on both sides
// (ioredis). 20k jobs of the ~1 KB Orca config of benches/job.json per run.
//
//   node benches/clients/bench.js [--jobs 20000] [--rounds 5] [--warmup 2] [--out benches/clients] [--quick]
//   node benches/clients/bench.js --render    (rewrites results.md from results.json and
//                                              analysis.md, e.g. after editing the analysis)
//
// Rows: adds (BullMQ Queue.add with a priority vs Queue.enqueue), one at a time (each
// awaited) and with 64 in flight (how a producer handling many requests sends them), and
// bulk (addBulk vs enqueueMany); then processing with Worker concurrency 16 and 64 on both
// (orca-queue's Worker: a slot finishing alone takes its next job with ACK ... NEXT, slots
// finishing together share one ORCA.MACK ... NEXT COUNT n), the same orca-queue Worker with
// `ackNext: false` (POP + ACK: plain ACKs, pops for the freed slots), also with handlers of
// 1-5 ms (jobs finish one by one, so ACK ... NEXT carries nearly every job), and four queues served at concurrency 16 (one
// orca-queue Worker over the four, with ORCA.MPOP; BullMQ, whose Worker serves one queue, four
// Workers of concurrency 4).
// --warmup rounds (default 2) run first, every row on both sides, and are not recorded: a worker
// is a long-running process, and until V8 has compiled a client's code on every path the rows
// take (a few hundred thousand jobs in this process, the optimizing compiler competing with
// node and Redis for the two cores) a 0.2 s row measures the compiler as much as the client.
// --warmup 0 gives what a cold process gets.
// For every phase it records wall time, the node process's CPU, redis-server's CPU (from
// /proc) and INFO commandstats, to show where the time goes. Writes results.md and
// results.json to --out. Environment: REDIS_SERVER, ORCA_MODULE.
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

const ROOT = path.resolve(__dirname, "../..");
const ORCA = require(path.join(ROOT, "clients/node/build/src"));
const { Queue: BullQueue, Worker: BullWorker } = require("bullmq");
const IORedis = require("ioredis");

const args = process.argv.slice(2);
const argValue = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const QUICK = args.includes("--quick");
const JOBS = Number(argValue("--jobs", QUICK ? 2000 : 20000));
const ROUNDS = Number(argValue("--rounds", QUICK ? 1 : 5));
const WARMUP = Number(argValue("--warmup", QUICK ? 0 : 2)); // unrecorded rounds before the recorded ones
const OUT = path.resolve(argValue("--out", path.join(ROOT, "benches/clients")));
const MODULE = process.env.ORCA_MODULE ?? path.join(ROOT, "target/release/liborca.so");
const REDIS_SERVER = process.env.REDIS_SERVER ?? "redis-server";
const WINDOW = 64; // adds in flight in the "concurrent" rows
const CONCURRENCY = [16, 64];
const MULTI = 4; // queues of the multi-queue row, served at concurrency 16
const TEMPLATE = fs.readFileSync(path.join(ROOT, "benches/job.json"), "utf8").trim();
const TICKS = 100; // USER_HZ for /proc/<pid>/stat

const PLAIN = "orca-queue POP+ACK"; // the orca-queue Worker with ackNext: false
const MULTI_ROW = `process, ${MULTI} queues, concurrency 16`;
const SLOW_ROW = "process, concurrency 64, 1-5 ms handlers"; // orca-queue only

const log = (m) => console.log(`[bench-clients ${new Date().toISOString().slice(11, 19)}] ${m}`);

// The config of job i (collation i/4), filled as benches/run.py fills the template.
function config(i, round) {
  const parts = TEMPLATE.split("__rand_int__");
  let out = parts[0];
  for (let k = 1; k < parts.length; k++) {
    const n = k === 2 ? Math.floor(i / 4) : round * 1e9 + i;
    out += String(n).padStart(12, "0") + parts[k];
  }
  return JSON.parse(out);
}

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function startServer() {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "orca-bench-clients-"));
  const proc = spawn(
    REDIS_SERVER,
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
      "--logfile", path.join(dir, "server.log"), "--loadmodule", MODULE],
    { stdio: "ignore" },
  );
  const stop = () => {
    if (proc.exitCode === null) proc.kill("SIGKILL");
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", stop);
  for (let t = 0; t < 200; t++) {
    const c = new IORedis({ port, lazyConnect: true, retryStrategy: () => null });
    c.on("error", () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return { port, pid: proc.pid, stop };
    } catch {
      c.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  stop();
  throw new Error("redis-server did not start");
}

function serverCpu(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) / TICKS; // utime + stime, seconds
}

async function commandstats(r) {
  const text = await r.info("commandstats");
  const out = {};
  for (const line of text.split("\n")) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (m) out[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return out;
}

// Runs `body` and records wall time, node CPU, server CPU and the server's per-command time.
async function measure(admin, pid, jobs, body) {
  await admin.config("RESETSTAT");
  const cpu0 = process.cpuUsage();
  const s0 = serverCpu(pid);
  const t0 = process.hrtime.bigint();
  await body();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const server = serverCpu(pid) - s0;
  const stats = await commandstats(admin);
  for (const k of Object.keys(stats)) if (k.startsWith("config") || k === "info") delete stats[k];
  const top = Object.entries(stats)
    .sort((a, b) => b[1].usec - a[1].usec)
    .slice(0, 4)
    .map(([name, s]) => ({ name, calls: s.calls, usPerCall: s.usec / s.calls }));
  return {
    jobs,
    wall,
    rate: jobs / wall,
    nodeUsPerJob: ((cpu.user + cpu.system) / jobs),
    serverUsPerJob: (server * 1e6) / jobs,
    callsPerJob: Object.values(stats).reduce((a, s) => a + s.calls, 0) / jobs,
    cmdUsPerJob: Object.entries(stats)
      .filter(([k]) => k.startsWith("orca."))
      .reduce((a, [, s]) => a + s.usec, 0) / jobs,
    top,
  };
}

// Calls add(i) for i in 0..n-1 with `window` calls in flight.
async function addAll(n, window, add) {
  let next = 0;
  const lane = async () => {
    while (next < n) await add(next++);
  };
  await Promise.all(Array.from({ length: Math.min(window, n) }, lane));
}

// A counter that resolves `done` when it reaches n (checked on every completion event).
function counter(n, what) {
  let count = 0;
  let resolve;
  let reject;
  const done = new Promise((res, rej) => ((resolve = res), (reject = rej)));
  const timer = setTimeout(() => reject(new Error(`${what}: only ${count} of ${n} done`)), 600_000);
  const inc = () => {
    if (++count === n) {
      clearTimeout(timer);
      resolve();
    }
  };
  return { inc, done };
}

// --- BullMQ --------------------------------------------------------------------------
async function bullAdds(conn, round, mode) {
  const q = new BullQueue(`bull-${round}-${mode}`, { connection: conn });
  await q.waitUntilReady();
  if (mode === "bulk") {
    for (let i = 0; i < JOBS; i += 1000) {
      const batch = [];
      for (let k = i; k < Math.min(i + 1000, JOBS); k++) batch.push({ name: "grade", data: config(k, round), opts: { priority: 1 + (k % 100) } });
      await q.addBulk(batch);
    }
  } else {
    await addAll(JOBS, mode === "one" ? 1 : WINDOW, (i) => q.add("grade", config(i, round), { priority: 1 + (i % 100) }));
  }
  return q;
}

async function bullProcess(conn, name, concurrency) {
  const c = counter(JOBS, "bullmq");
  const w = new BullWorker(name, async (job) => ({ ok: true, key: job.data.key.length }), {
    connection: { ...conn, maxRetriesPerRequest: null },
    concurrency,
  });
  w.on("completed", c.inc);
  w.on("error", (e) => log(`bullmq worker error: ${e.message}`));
  await c.done;
  await w.close();
}

// BullMQ's Worker serves one queue: four queues are four Workers sharing the concurrency.
async function bullProcessMany(conn, names, concurrency) {
  const c = counter(JOBS, "bullmq");
  const workers = names.map((name) => {
    const w = new BullWorker(name, async (job) => ({ ok: true, key: job.data.key.length }), {
      connection: { ...conn, maxRetriesPerRequest: null },
      concurrency: concurrency / names.length,
    });
    w.on("completed", c.inc);
    w.on("error", (e) => log(`bullmq worker error: ${e.message}`));
    return w;
  });
  await c.done;
  await Promise.all(workers.map((w) => w.close()));
}

async function bullFillMany(conn, tag, n) {
  const names = [];
  for (let k = 0; k < n; k++) {
    const q = new BullQueue(`bull-${tag}-m${k}`, { connection: conn });
    await q.waitUntilReady();
    for (let i = k; i < JOBS; i += 1000 * n) {
      const batch = [];
      for (let j = i; j < Math.min(i + 1000 * n, JOBS); j += n)
        batch.push({ name: "grade", data: config(j, tag), opts: { priority: 1 + (j % 100) } });
      await q.addBulk(batch);
    }
    names.push(q.name);
    await q.close();
  }
  return names;
}

// --- orca-queue -------------------------------------------------------------------------
async function orcaFillMany(client, tag, n) {
  const queues = Array.from({ length: n }, (_, k) => new ORCA.Queue(client, `{orca-${tag}}:m${k}`));
  for (let i = 0; i < JOBS; i += 1000) {
    const batches = queues.map(() => []);
    for (let j = i; j < Math.min(i + 1000, JOBS); j++) batches[j % n].push(config(j, tag));
    const out = (await Promise.all(queues.map((q, k) => q.enqueueMany(batches[k])))).flat();
    const bad = out.find((x) => x instanceof Error);
    if (bad) throw bad;
  }
  return queues;
}

async function orcaAdds(client, round, mode) {
  const q = new ORCA.Queue(client, `orca-${round}-${mode}`);
  if (mode === "bulk") {
    for (let i = 0; i < JOBS; i += 1000) {
      const batch = [];
      for (let k = i; k < Math.min(i + 1000, JOBS); k++) batch.push(config(k, round));
      const out = await q.enqueueMany(batch);
      const bad = out.find((x) => x instanceof Error);
      if (bad) throw bad;
    }
  } else {
    await addAll(JOBS, mode === "one" ? 1 : WINDOW, (i) => q.enqueue(config(i, round)));
  }
  return q;
}

// Handlers that take 1-5 ms (timers), so jobs finish one by one rather than in batches.
let spread = 0;
async function slowHandler(job) {
  await new Promise((res) => setTimeout(res, 1 + (spread++ % 5)));
  return { ok: true, key: job.config.key.length };
}

async function orcaProcess(q, concurrency, ackNext = true, handler = undefined) {
  const c = counter(JOBS, "orca");
  const w = new ORCA.Worker(q, handler ?? (async (job) => ({ ok: true, key: job.config.key.length })), {
    concurrency,
    leaseMs: 600_000,
    handleSignals: false,
    ackNext,
  });
  w.on("completed", c.inc);
  await c.done;
  await w.close();
}

async function orcaCheckDrained(qs) {
  for (const q of [qs].flat()) {
    const st = await q.stats();
    if (st.queued || st.leased || st.dead) throw new Error(`orca queue not drained: ${JSON.stringify(st)}`);
  }
}

// --- report -------------------------------------------------------------------------------
const fmt = (x) => Math.round(x).toLocaleString("en-US");
const f1 = (x) => x.toFixed(1);
const topText = (m) => m.top.map((t) => `${t.name} ${t.calls}×${t.usPerCall.toFixed(1)}µs`).join(", ");

function report(rows, meta) {
  const L = [];
  const w = (s = "") => L.push(s);
  w("# The full job cycle: orca-queue (Node) against BullMQ 5");
  w();
  w(`Generated by \`make bench-clients\` (\`node benches/clients/bench.js\`) on ${meta.date}: ${meta.jobs} jobs of the ` +
    `${meta.payload}-byte Orca config of benches/job.json per row, one redis-server ${meta.redis} (with the module loaded; ` +
    `BullMQ ignores it), ${meta.cpus} CPUs (${meta.cpuModel}), node ${meta.node}, BullMQ ${meta.bullmq}, ioredis ${meta.ioredis} ` +
    `on both sides; load average (1, 5, 15 min) ${meta.loadStart ? `at the start ${meta.loadStart}, ` : ""}at the end ${meta.load}. Each side runs alone while measured; ` +
    `${meta.warmup ? `after ${meta.warmup} unrecorded warm-up rounds (every row, both sides), ` : ""}` +
    `${meta.rounds} rounds alternate which side goes first. Rates are medians over the rounds, ratios the median of the per-round ratios.`);
  w();
  w("| what | BullMQ jobs/s | orca-queue jobs/s | ratio | per round | target |");
  w("|---|---|---|---|---|---|");
  for (const t of meta.targets) {
    const per = t.ratios.map((r) => r.toFixed(2)).join(", ");
    w(`| ${t.what} | ${fmt(t.bull)} | ${fmt(t.orca)} | **${t.ratio.toFixed(2)}x** | ${per} | ${t.target} |`);
  }
  w();
  w("The orca-queue Worker (default, `ackNext: true`): a slot that finishes alone takes its next job with " +
    "`ORCA.ACK ... NEXT`; slots that finish in the same event-loop turn share one `ORCA.MACK ... NEXT COUNT n` " +
    "(one command acks them all and brings their next jobs). The same Worker with `ackNext: false` (POP + ACK: " +
    "plain ACKs, free slots refilled by `ORCA.POP ... COUNT`), on the same server in the same rounds; the last " +
    "row's handlers take 1-5 ms (timers), so jobs finish one by one and ACK ... NEXT carries nearly every job:");
  w();
  w("| what | POP + ACK jobs/s | NEXT (ACK/MACK) jobs/s | ratio | per round | commands/job | ORCA.* server µs/job | node CPU µs/job |");
  w("|---|---|---|---|---|---|---|---|");
  for (const t of meta.nextRows) {
    const per = t.ratios.map((r) => r.toFixed(2)).join(", ");
    const pair = (k, d) => `${t.plain[k].toFixed(d)} / ${t.next[k].toFixed(d)}`;
    w(`| ${t.what} | ${fmt(t.plain.rate)} | ${fmt(t.next.rate)} | **${t.ratio.toFixed(2)}x** | ${per} | ` +
      `${pair("callsPerJob", 2)} | ${pair("cmdUsPerJob", 1)} | ${pair("nodeUsPerJob", 1)} |`);
  }
  w();
  w("Pairs are POP + ACK / NEXT (ACK/MACK). ORCA.* server µs/job is the time INFO commandstats gives the ORCA.* " +
    "commands (execution only), per job; `server CPU` below also counts protocol I/O.");
  w();
  w("## Where the time goes");
  w();
  w("Per job: the node process's CPU (the client library: building commands, parsing replies, the worker's " +
    "bookkeeping, promises, GC, socket syscalls; plus the bench's own config building and the handler's JSON " +
    "parse of the job, the same on both sides), redis-server's CPU (from /proc, 10 ms ticks: command execution, " +
    "Lua for BullMQ, protocol I/O), and the commands the server ran per job (INFO commandstats, which also counts " +
    "the commands BullMQ's Lua scripts call; `top` lists calls × µs per call, the script's time including them).");
  w();
  w("| row | side | jobs/s | wall s | node CPU µs/job | server CPU µs/job | commands/job | top commands (calls × µs) |");
  w("|---|---|---|---|---|---|---|---|");
  for (const r of rows) {
    w(`| ${r.row} | ${r.side} | ${fmt(r.rate)} | ${r.wall.toFixed(2)} | ${f1(r.nodeUsPerJob)} | ${f1(r.serverUsPerJob)} | ` +
      `${r.callsPerJob.toFixed(2)} | ${topText(r)} |`);
  }
  w();
  const analysis = path.join(__dirname, "analysis.md");
  if (fs.existsSync(analysis)) L.push(fs.readFileSync(analysis, "utf8"));
  return L.join("\n");
}

const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

async function main() {
  if (args.includes("--render")) {
    const { meta, rows } = JSON.parse(fs.readFileSync(path.join(OUT, "results.json"), "utf8"));
    fs.writeFileSync(path.join(OUT, "results.md"), report(rows, meta));
    console.log(`wrote ${path.join(OUT, "results.md")} from results.json`);
    return;
  }
  if (!fs.existsSync(MODULE)) throw new Error(`${MODULE} not found: run make build`);
  const loadStart = os.loadavg().map((x) => x.toFixed(1)).join(" ");
  const server = await startServer();
  const conn = { host: "127.0.0.1", port: server.port };
  const admin = new IORedis(conn);
  const orcaClient = new IORedis(conn);
  const samples = []; // { row, side, round, ...measure }
  const cold = []; // the first round of this process (a warm-up round unless --warmup 0): a cold process
  log(`redis-server pid ${server.pid} on port ${server.port}; ${JOBS} jobs per row, ${WARMUP} warm-up + ${ROUNDS} rounds`);
  const record = (row, side, round, m) => {
    if (round === 1 - WARMUP) cold.push({ row, side, round, ...m });
    if (round < 1) {
      log(`(warm-up) ${row.padEnd(28)} ${side.padEnd(10)} ${fmt(m.rate).padStart(8)} jobs/s`);
      return;
    }
    samples.push({ row, side, round, ...m });
    log(`${row.padEnd(28)} ${side.padEnd(10)} ${fmt(m.rate).padStart(8)} jobs/s  node ${f1(m.nodeUsPerJob)} µs/job, server ${f1(m.serverUsPerJob)} µs/job`);
  };
  const addLabel = { one: "add, one at a time", window: `add, ${WINDOW} in flight`, bulk: "add, bulk of 1000" };
  let tag = 0;
  for (let round = 1 - WARMUP; round <= ROUNDS; round++) {
    // Alternate which side goes first, so drift on a shared machine hits both alike.
    const sides = round % 2 ? ["BullMQ", "orca-queue"] : ["orca-queue", "BullMQ"];
    for (const mode of ["one", "window", "bulk"]) {
      for (const side of sides) {
        tag++;
        await admin.flushall();
        const m = await measure(admin, server.pid, JOBS, () =>
          side === "BullMQ" ? bullAdds(conn, tag, mode).then((q) => q.close()) : orcaAdds(orcaClient, tag, mode),
        );
        record(addLabel[mode], side, round, m);
      }
    }
    // The orca-queue Worker also runs with ackNext: false (POP + ACK), first or last in turn.
    const procSides = round % 2 ? [...sides, PLAIN] : [PLAIN, ...sides];
    for (const c of CONCURRENCY) {
      for (const side of procSides) {
        tag++;
        await admin.flushall(); // fill (not measured), then process (measured)
        let m;
        if (side === "BullMQ") {
          const bq = await bullAdds(conn, tag, "bulk");
          await bq.close();
          m = await measure(admin, server.pid, JOBS, () => bullProcess(conn, bq.name, c));
        } else {
          const oq = await orcaAdds(orcaClient, tag, "bulk");
          m = await measure(admin, server.pid, JOBS, () => orcaProcess(oq, c, side !== PLAIN));
          await orcaCheckDrained(oq);
        }
        record(`process, concurrency ${c}`, side, round, m);
      }
    }
    for (const side of procSides.filter((x) => x !== "BullMQ")) {
      tag++;
      await admin.flushall();
      const oq = await orcaAdds(orcaClient, tag, "bulk");
      const m = await measure(admin, server.pid, JOBS, () => orcaProcess(oq, 64, side !== PLAIN, slowHandler));
      await orcaCheckDrained(oq);
      record(SLOW_ROW, side, round, m);
    }
    for (const side of sides) {
      tag++;
      await admin.flushall();
      let m;
      if (side === "BullMQ") {
        const names = await bullFillMany(conn, tag, MULTI);
        m = await measure(admin, server.pid, JOBS, () => bullProcessMany(conn, names, 16));
      } else {
        const qs = await orcaFillMany(orcaClient, tag, MULTI);
        m = await measure(admin, server.pid, JOBS, () => orcaProcess(qs, 16));
        await orcaCheckDrained(qs);
      }
      record(MULTI_ROW, side, round, m);
    }
  }

  // Per row and side: medians over rounds; ratios: the median of the per-round ratios.
  const rowNames = [...new Set(samples.map((x) => x.row))];
  const rows = [];
  for (const row of rowNames) {
    for (const side of ["BullMQ", "orca-queue", PLAIN]) {
      const xs = samples.filter((x) => x.row === row && x.side === side);
      if (xs.length === 0) continue;
      const top = xs[xs.length - 1].top;
      const m = (k) => median(xs.map((x) => x[k]));
      rows.push({ row, side, rate: m("rate"), wall: m("wall"), nodeUsPerJob: m("nodeUsPerJob"),
        serverUsPerJob: m("serverUsPerJob"), callsPerJob: m("callsPerJob"), cmdUsPerJob: m("cmdUsPerJob"), top,
        rates: xs.map((x) => x.rate) });
    }
  }
  const targets = [];
  const target = (what, row, want) => {
    const b = samples.filter((x) => x.row === row && x.side === "BullMQ");
    const o = samples.filter((x) => x.row === row && x.side === "orca-queue");
    const ratios = b.map((x, i) => o[i].rate / x.rate);
    targets.push({ what, bull: median(b.map((x) => x.rate)), orca: median(o.map((x) => x.rate)),
      ratio: median(ratios), ratios, target: want ? `>= ${want}x` : "" });
  };
  target(`add (Queue.add with priority / enqueue), ${WINDOW} in flight`, addLabel.window, 2);
  target("add, one at a time (each awaited)", addLabel.one, 0);
  target("add, bulk of 1000 (addBulk / enqueueMany)", addLabel.bulk, 0);
  for (const c of CONCURRENCY) target(`process, Worker concurrency ${c}`, `process, concurrency ${c}`, 5);
  // A fresh process's first round (V8 has compiled little yet): one value, so noisier.
  const coldOf = (side) => cold.find((x) => x.row === "process, concurrency 16" && x.side === side);
  if (coldOf("BullMQ") && coldOf("orca-queue")) {
    const [b, o] = [coldOf("BullMQ").rate, coldOf("orca-queue").rate];
    targets.push({ what: "process, Worker concurrency 16, the first round of a fresh process", bull: b, orca: o,
      ratio: o / b, ratios: [o / b], target: ">= 5x" });
  }
  target(`process, ${MULTI} queues at concurrency 16 (orca: one Worker, MPOP; BullMQ: ${MULTI} Workers)`, MULTI_ROW, 0);
  const nextRows = [...CONCURRENCY.map((c) => `process, concurrency ${c}`), SLOW_ROW].map((row) => {
    const next = samples.filter((x) => x.row === row && x.side === "orca-queue");
    const plain = samples.filter((x) => x.row === row && x.side === PLAIN);
    const ratios = plain.map((x, i) => next[i].rate / x.rate);
    const agg = (xs) => ({
      rate: median(xs.map((x) => x.rate)),
      cmdUsPerJob: median(xs.map((x) => x.cmdUsPerJob)),
      callsPerJob: median(xs.map((x) => x.callsPerJob)),
      nodeUsPerJob: median(xs.map((x) => x.nodeUsPerJob)),
    });
    const what = row.replace("process, concurrency", "Worker concurrency");
    return { what, next: agg(next), plain: agg(plain), ratio: median(ratios), ratios };
  });

  const info = await admin.info("server");
  const meta = {
    date: new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC",
    jobs: JOBS,
    rounds: ROUNDS,
    warmup: WARMUP,
    payload: Buffer.byteLength(JSON.stringify(config(0, 1))),
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "?",
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model.trim() ?? "?",
    load: os.loadavg().map((x) => x.toFixed(1)).join(" "),
    node: process.version,
    loadStart,
    bullmq: require("bullmq/package.json").version,
    ioredis: require("ioredis/package.json").version,
    targets,
    nextRows,
  };
  admin.disconnect();
  orcaClient.disconnect();
  server.stop();
  fs.mkdirSync(OUT, { recursive: true });
  fs.writeFileSync(path.join(OUT, "results.md"), report(rows, meta));
  fs.writeFileSync(path.join(OUT, "results.json"), JSON.stringify({ meta, rows, samples }, null, 2) + "\n");
  console.log();
  for (const t of nextRows) {
    console.log(`NEXT (ACK/MACK) vs POP + ACK, ${t.what.padEnd(36)} ${t.ratio.toFixed(2).padStart(6)}x  rounds: ${t.ratios.map((r) => r.toFixed(2)).join(" ")}`);
  }
  for (const t of targets) {
    const verdict = t.target ? (t.ratio >= Number(t.target.slice(3, -1)) ? "PASS" : "MISS") : "";
    const per = t.ratios.map((r) => r.toFixed(2)).join(" ");
    console.log(`${t.what.padEnd(62)} ${t.ratio.toFixed(2).padStart(6)}x  ${t.target.padEnd(6)} ${verdict.padEnd(4)}  rounds: ${per}`);
  }
  console.log(`\nwrote ${path.join(OUT, "results.md")}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);

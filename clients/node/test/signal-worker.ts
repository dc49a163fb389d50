/**
 * A worker process for signals.test.ts: `node signal-worker.js <port> <queue> <graceMs> <mode>`,
 * with `handleSignals` on (the default). Its one handler runs until released: `stubborn` waits
 * 2 s whatever happens, `polite` also ends when `job.signal` aborts. Reports on stderr, one
 * line each: `started`, `settled`, `closed`.
 */
import Redis from "ioredis";

import { Job, Queue, Worker } from "../src";

const [port, name, graceMs, mode] = [
  Number(process.argv[2]),
  process.argv[3]!,
  Number(process.argv[4]),
  process.argv[5],
];
const say = (m: string) => process.stderr.write(`${m}\n`);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const redis = new Redis({ port });
const worker = new Worker(
  new Queue(redis, name),
  async (job: Job) => {
    say("started");
    await new Promise<void>((res) => {
      const t = setTimeout(res, 2000);
      if (mode === "polite")
        job.signal.addEventListener("abort", () => {
          clearTimeout(t); // a pending timer would keep the process alive too
          res();
        });
    });
    say("settled");
    return "done";
  },
  { leaseMs: 60_000, blockMs: 1000, graceMs, logger: quiet },
);
worker.on("closed", () => {
  say("closed");
  redis.disconnect();
});

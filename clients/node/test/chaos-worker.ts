/**
 * A worker process for chaos.test.ts: `node chaos-worker.js <port> <queue>`. Sleeps what each
 * job's config says, returns {pid, lease} as the ACK result, records completions (after the
 * ACK succeeded) with RPUSH on `<queue>:done` and every job it starts on `<queue>:started:<pid>`
 * (so the test kills a worker only once it holds leases), and closes gracefully on SIGTERM
 * (grace 50 ms).
 */
import Redis from "ioredis";

import { Job, Queue, Worker } from "../src";

const [port, name] = [Number(process.argv[2]), process.argv[3]!];
const redis = new Redis({ port });
const logger = {
  debug() {},
  info: (m: string) => console.error(`[${process.pid}] ${m}`),
  warn: (m: string) => console.error(`[${process.pid}] ${m}`),
  error: (m: string) => console.error(`[${process.pid}] ${m}`),
};
const worker = new Worker(
  new Queue(redis, name),
  async (job: Job) => {
    await redis.rpush(`${name}:started:${process.pid}`, job.key);
    await new Promise((res) => setTimeout(res, (job.config as { sleep_ms: number }).sleep_ms));
    return { pid: process.pid, lease: job.lease };
  },
  { concurrency: 4, leaseMs: 1000, blockMs: 1000, graceMs: 50, logger },
);
worker.on("completed", (job: Job) => void redis.rpush(`${name}:done`, job.key));
worker.on("closed", () => {
  console.error(`[${process.pid}] counts ${JSON.stringify(worker.counts)}`);
  void redis.quit();
});

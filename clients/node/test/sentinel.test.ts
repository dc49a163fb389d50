/**
 * Sentinel: one master, two replicas and three Sentinels; a producer (durable writes) and a
 * Worker on ioredis clients made with the `sentinels` option. The master is SIGKILLed mid-run:
 * both continue by themselves on the promoted replica (the Worker's blocking connection too),
 * and every acknowledged enqueue is completed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Redis from "ioredis";

import { NotReplicatedError, Queue, Worker } from "../src";
import { SentinelSet } from "./deploy";
import { waitFor } from "./server";

let set: SentinelSet;
before(async () => {
  set = await SentinelSet.start("orca-node");
});
after(() => set.close());

const viaSentinel = () =>
  new Redis({ sentinels: set.sentinelAddresses, name: set.name, sentinelRetryStrategy: () => 100 });

describe("under Sentinel", () => {
  it("producer and worker continue through a failover, losing no acknowledged job", async () => {
    const producerClient = viaSentinel();
    const workerClient = viaSentinel();
    producerClient.on("error", () => {});
    workerClient.on("error", () => {});
    const q = new Queue(producerClient, "failover", { waitReplicas: 1, waitTimeoutMs: 2000 });
    const acked = new Set<string>();
    const done = new Set<string>();
    const w = new Worker(
      new Queue(workerClient, "failover", { waitReplicas: 1, waitTimeoutMs: 2000 }),
      (job) => {
        done.add(job.key);
        return { ok: 1 };
      },
      {
        concurrency: 4,
        leaseMs: 8000,
        blockMs: 1000,
        handleSignals: false,
        logger: { debug() {}, info() {}, warn() {}, error() {} },
      },
    );
    w.on("error", () => {});
    let stop = false;
    let recoveredAt = 0;
    let killedAt = 0;
    const produce = (async () => {
      for (let i = 0; !stop; i++) {
        for (;;) {
          try {
            acked.add((await q.enqueue({ key: `job-${i}` })).key);
            if (killedAt && !recoveredAt) recoveredAt = Date.now();
            break;
          } catch (e) {
            // Not confirmed, or no master yet: an enqueue is a PUT, sent again until acknowledged.
            if (!(e instanceof NotReplicatedError || e instanceof Error)) throw e;
            await new Promise((r) => setTimeout(r, 50));
          }
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      await waitFor(() => done.size > 50, 30_000);
      const old = set.master.port;
      killedAt = Date.now();
      set.master.kill();
      await waitFor(async () => (await set.masterPort()) !== old, 30_000);
      await waitFor(() => recoveredAt > 0, 30_000);
      await new Promise((r) => setTimeout(r, 1000)); // more jobs on the new master
      stop = true;
      await produce;
      await waitFor(() => [...acked].every((k) => done.has(k)), 60_000);
    } finally {
      stop = true;
      await w.close();
      producerClient.disconnect();
      workerClient.disconnect();
    }
    console.log(
      `# sentinel failover: ${acked.size} acknowledged enqueues, producer back after ${recoveredAt - killedAt} ms`,
    );
    // Enqueues were acknowledged before the kill (the worker had done 50) and after it.
    assert.ok(recoveredAt > killedAt && acked.size > 50);
  });
});

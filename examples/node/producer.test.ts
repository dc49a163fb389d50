import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type Redis from "ioredis";
import { BadConfigError } from "orca-queue";

import { Server } from "../../clients/node/test/server";
import { GradingQueue } from "./producer";

let server: Server;
let redis: Redis;
before(async () => {
  server = await Server.start();
  redis = server.client();
});
after(() => {
  redis.disconnect();
  server.stop();
});

const cb = "http://web/api/result";
const sub = (key: string, user: string, extra: Record<string, unknown> = {}) => ({
  key,
  response_url: cb,
  collation: { type: "user" as const, id: user },
  metadata_table: { course: "CS2500" },
  ...extra,
});

it("submits, regrades, prioritizes, cancels and inspects like the orchestrator", async () => {
  const g = new GradingQueue(redis, "grading-example");
  const a = await g.submit(sub("s1", "7", { priority: 60_000 }));
  const b = await g.submit(sub("s2", "8"));
  assert.equal(a.created, true);
  assert.deepEqual(await g.waitingFor("CS2500"), [
    { key: "s2", position: 1 },
    { key: "s1", position: 2 },
  ]);
  const regrade = await g.submit(sub("s1", "7", { priority: 60_000, script: ["new"] }));
  assert.equal(regrade.created, false);
  assert.equal(regrade.orcaKey, a.orcaKey);
  await g.prioritize(sub("s1", "7"));
  assert.deepEqual(await g.whereIs(sub("s1", "7")), { state: "queued", position: 1 });
  await g.deprioritize(sub("s2", "8"));
  assert.equal((await g.whereIs(sub("s2", "8")))?.position, 2);
  assert.equal(await g.cancel(sub("s2", "8")), true);
  assert.equal(await g.whereIs(sub("s2", "8")), null);
  const many = await g.submitAll([sub("s3", "9"), { key: 5 } as never, sub("s4", "9")]);
  assert.ok(many[1] instanceof BadConfigError);
  assert.equal((await g.stats()).queued, 3);
  assert.ok(b.orcaKey.length === 44);
});

it("holds submissions behind an image build, then releases or drops them", async () => {
  const g = new GradingQueue(redis, "grading-images");
  const policies = await g.configure(3);
  assert.deepEqual(
    [policies.maxRunning, policies.lifetimeMs, policies.autodelay.stepMs],
    [3, 24 * 3_600_000, 60_000],
  );
  await g.imageBuilding("hw3");
  await g.imageBuilding("hw4");
  await g.submit(sub("h1", "1", { gate: "hw3" }));
  await g.submit(sub("h2", "2", { gate: "hw4" }));
  await g.submit(sub("free", "3"));
  assert.deepEqual(await g.whereIs(sub("h1", "1")), { state: "held", image: "hw3" });
  assert.deepEqual(await g.waitingFor("CS2500"), [{ key: "free", position: 1 }]);
  assert.equal(await g.imageBuilt("hw3"), 1);
  assert.equal((await g.whereIs(sub("h1", "1")))?.state, "queued");
  const told: string[] = [];
  assert.equal(await g.imageFailed("hw4", async (c) => void told.push(`${c.key} ${c.response_url}`)), 1);
  assert.deepEqual(told, [`h2 ${cb}`]);
  assert.equal(await g.whereIs(sub("h2", "2")), null);
  // The automatic delay: a student's second submission within 15 minutes goes a minute back.
  const first = await g.submit(sub("s1", "9"));
  const second = await g.submit(sub("s2", "9"));
  assert.ok(second.releaseAt >= first.releaseAt);
  assert.equal((await g.stats()).held, 0);
});

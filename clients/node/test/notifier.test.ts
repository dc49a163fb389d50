import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Redis from "ioredis";

import { CallbackFailed, Job, NackOutcome, Notifier, Queue, callbackRequest, retryAfterMs } from "../src";
import type { NotifierOptions } from "../src";
import { CallbackServer } from "./callback-server";
import { Server, qname, waitFor } from "./server";

// A server whose retries come quickly and die after 4 attempts.
let server: Server;
let r: Redis;
const running: Notifier[] = [];
const https: CallbackServer[] = [];
before(async () => {
  server = await Server.start("retry-base", "100", "retry-cap", "400", "max-attempts", "4");
  r = server.client();
});
after(async () => {
  await Promise.all(running.map((n) => n.close({ graceMs: 0 })));
  await Promise.all(https.map((h) => h.stop()));
  r.disconnect();
  server.stop();
});

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
function start(q: Queue, opts: NotifierOptions = {}): Notifier {
  const n = new Notifier(q, {
    handleSignals: false,
    logger: quiet,
    timeoutMs: 2000,
    leaseMs: 10_000,
    blockMs: 200,
    ...opts,
  });
  running.push(n);
  return n;
}
async function http(
  script?: (
    path: string,
    n: number,
  ) => { status?: number; headers?: Record<string, string>; stallMs?: number },
) {
  const h = await CallbackServer.start(script);
  https.push(h);
  return h;
}
const callback = (h: CallbackServer, path: string, body: Record<string, unknown> = {}) => ({
  key: path,
  response_url: h.url(path),
  body,
});
const configKey = (job: Job) => (job.config as { key: string }).key;

describe("Notifier", () => {
  it("reads Retry-After as seconds or a date", () => {
    assert.equal(retryAfterMs("3"), 3000);
    assert.equal(retryAfterMs(" 0 "), 0);
    assert.equal(retryAfterMs(null), undefined);
    assert.equal(retryAfterMs("soon"), undefined);
    assert.equal(retryAfterMs("-1"), undefined);
    const now = 1_700_000_000_000;
    assert.equal(retryAfterMs(new Date(now + 5000).toUTCString(), now), 5000);
    assert.equal(retryAfterMs(new Date(now - 50_000).toUTCString(), now), 0);
    assert.equal(retryAfterMs("999999999"), 86_400_000);
  });

  it("never drops a config it cannot deliver", () => {
    const job = (payload: string) => Object.assign(new Job(), { key: "k", payload });
    for (const payload of ['{"key":"x"}', '{"key":"x","response_url":"ftp://h/x"}', "[1]", "{"]) {
      assert.throws(() => callbackRequest(job(payload)), CallbackFailed);
    }
    const ok = '{"key":"x","response_url":"http://h/x"}';
    assert.deepEqual(callbackRequest(job(ok)), ["http://h/x", JSON.parse(ok)]);
  });

  it("delivers each callback with its body and acks with the status", async () => {
    const h = await http((path) => ({ status: path === "/b" ? 201 : 200 }));
    const q = new Queue(r, qname());
    await q.enqueue(callback(h, "/a", { verdict: "accepted", score: 97 }));
    const whole = { key: "/b", response_url: h.url("/b"), score: 40 };
    await q.enqueue(whole);
    const done: string[] = [];
    const n = start(q, { headers: { "x-secret": "s3" } });
    n.on("completed", (job: Job) => done.push(configKey(job)));
    await waitFor(() => done.length === 2);
    const [a] = h.posts("/a");
    assert.deepEqual(a?.body, { verdict: "accepted", score: 97 });
    assert.equal(a?.headers["content-type"], "application/json");
    assert.equal(a?.headers["x-secret"], "s3");
    assert.deepEqual(h.posts("/b")[0]?.body, whole);
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased, st.delayed, st.dead], [0, 0, 0, 0]);
  });

  it("retries a 503 when its Retry-After asks, then delivers", async () => {
    const h = await http((_, n) => (n === 0 ? { status: 503, headers: { "retry-after": "1" } } : {}));
    const q = new Queue(r, qname());
    await q.enqueue(callback(h, "/r", { v: 1 }));
    const failed: [unknown, NackOutcome][] = [];
    let done = 0;
    const n = start(q);
    n.on("failed", (_job: Job, e: unknown, o: NackOutcome) => failed.push([e, o]));
    n.on("completed", () => done++);
    await waitFor(() => done === 1);
    const [first, second] = h.posts("/r");
    assert.ok(second!.at - first!.at >= 950, `${second!.at - first!.at} ms`);
    const [e, o] = failed[0]!;
    assert.ok(e instanceof CallbackFailed && e.status === 503 && e.delayMs === 1000);
    assert.equal(o.outcome, "retry");
  });

  it("uses the queue's backoff after a 429 without Retry-After and after a stall", async () => {
    const h = await http((_, n) => (n === 0 ? { status: 429 } : n === 1 ? { stallMs: 1500 } : {}));
    const q = new Queue(r, qname());
    await q.enqueue(callback(h, "/s"));
    const errors: string[] = [];
    let done = 0;
    const n = start(q, { timeoutMs: 500 });
    n.on("failed", (_job: Job, e: Error) => errors.push(e.message));
    n.on("completed", () => done++);
    await waitFor(() => done === 1);
    assert.deepEqual(errors, ["HTTP 429", "timeout after 500 ms"]);
    assert.equal(h.posts("/s").length, 3);
  });

  it("delivers every callback to a receiver that goes away and recovers: none dropped", async () => {
    const h = await http();
    await h.stop();
    const q = new Queue(r, qname());
    const paths = Array.from({ length: 20 }, (_, i) => `/c${i}`);
    for (const p of paths) await q.enqueue(callback(h, p, { n: p }));
    const done: string[] = [];
    const errors: string[] = [];
    const n = start(q, { concurrency: 4 });
    n.on("completed", (job: Job) => done.push(configKey(job)));
    n.on("failed", (_job: Job, e: Error) => errors.push(e.message));
    await waitFor(() => errors.length >= 20);
    assert.ok(
      errors.every((e) => e.startsWith("connection error")),
      errors[0],
    );
    await h.listen();
    await waitFor(() => done.length === 20);
    assert.deepEqual([...done].sort(), [...paths].sort());
    for (const p of paths)
      assert.deepEqual(
        h.posts(p).map((x) => x.body),
        [{ n: p }],
      );
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased, st.delayed, st.dead], [0, 0, 0, 0]);
  });

  it("leaves a dead letter after the queue's attempts when the receiver keeps failing", async () => {
    const h = await http((_, n) => ({ status: 500 + n }));
    const q = new Queue(r, qname());
    const job = await q.enqueue(callback(h, "/dead"));
    const outcomes: string[] = [];
    const n = start(q);
    n.on("failed", (_job: Job, e: Error, o: NackOutcome) => outcomes.push(`${e.message} ${o.outcome}`));
    await waitFor(() => outcomes.length === 4);
    assert.deepEqual(outcomes, ["HTTP 500 retry", "HTTP 501 retry", "HTTP 502 retry", "HTTP 503 dead"]);
    const dead = await q.dead();
    assert.equal(dead.length, 1);
    assert.equal(dead[0]?.key, job.key);
    assert.equal(dead[0]?.attempts, 4);
    assert.equal(h.posts("/dead").length, 4);
  });

  it("lets the POSTs in flight finish on close()", async () => {
    const h = await http(() => ({ stallMs: 800 }));
    const q = new Queue(r, qname());
    for (let i = 0; i < 3; i++) await q.enqueue(callback(h, `/g${i}`));
    const done: string[] = [];
    const n = start(q, { concurrency: 3 });
    n.on("completed", (job: Job) => done.push(configKey(job)));
    await waitFor(() => h.received.length === 3);
    const t0 = Date.now();
    await n.close();
    assert.deepEqual([...done].sort(), ["/g0", "/g1", "/g2"]);
    assert.ok(Date.now() - t0 < 5000);
    const st = await q.stats();
    assert.deepEqual([st.queued, st.leased], [0, 0]);
  });

  it("checks its options", () => {
    const q = new Queue(r, qname());
    assert.throws(() => new Notifier(q, { timeoutMs: 0, autorun: false }), /timeoutMs/);
    assert.throws(() => new Notifier(q, { timeoutMs: 5000, leaseMs: 5000, autorun: false }), /leaseMs/);
  });
});

/**
 * Every error code the client maps (docs/commands.md, "Error codes"), provoked on a real
 * server (`make test-node` runs this file against Redis 7.0 and again against Valkey 8): the
 * class comes from the code, the fields from the fields, `message` is the text. Codes a
 * healthy server cannot be made to give (INVARIANT, NOTQUEUED) are checked on the reply's
 * form alone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ReplyError } from "ioredis";

import {
  BadConfigError,
  InvalidArgumentError,
  InvariantError,
  JobCancelledError,
  JobNotQueuedError,
  JobStateError,
  LeaseLostError,
  NoSuchJobError,
  OrcaError,
  Queue,
  QueueFullError,
  ResultTooLargeError,
  WrongTypeError,
  mapError,
} from "../src";
import { Server, cfg, fileServer, qname } from "./server";

const ctx = fileServer();

/** The rejection of `p`, which must be an OrcaError of exactly `cls` with `code`. */
async function refused<T extends OrcaError>(
  p: Promise<unknown>,
  cls: new (...a: never[]) => T,
  code: string,
): Promise<T> {
  const e = await p.then(
    () => assert.fail(`expected ${code}`),
    (x: unknown) => x,
  );
  assert.ok(e instanceof OrcaError, String(e));
  assert.equal(e.constructor, cls, `${e.name}: ${e.reply}`);
  assert.equal(e.code, code);
  assert.ok(e.reply.startsWith(`${code} `), e.reply);
  return e as T;
}

/** Run `f` with the module setting `name` at `value`, then put it back. */
async function withSetting<T>(name: string, value: string, f: () => Promise<T>): Promise<T> {
  const [, old] = (await ctx.r.call("CONFIG", "GET", name)) as [string, string];
  await ctx.r.call("CONFIG", "SET", name, value);
  try {
    return await f();
  } finally {
    await ctx.r.call("CONFIG", "SET", name, old);
  }
}

describe("error codes", () => {
  it("ERR is an invalid argument; Redis's own refusals stay ioredis's", async () => {
    const q = new Queue(ctx.r, qname());
    const e = await refused(q.popMany(0), InvalidArgumentError, "ERR");
    assert.equal(e.message, "COUNT must be between 1 and 1000");
    const raw = await ctx.r.call("ORCA.POP").catch((x: unknown) => x);
    assert.equal(mapError(raw), raw);
  });

  it("WRONGTYPE, BADCONFIG, NOJOB, IMMEDIATE", async () => {
    const name = qname();
    await ctx.r.set(name, "x");
    await refused(new Queue(ctx.r, name).len(), WrongTypeError, "WRONGTYPE");
    const q = new Queue(ctx.r, qname());
    const bad = await refused(q.enqueue(cfg("a", { priority: 1.5 })), BadConfigError, "BADCONFIG");
    assert.equal(bad.message, "priority must be an integer number of ms, not a fraction");
    const none = await refused(q.release("A".repeat(43) + "="), NoSuchJobError, "NOJOB");
    assert.equal(none.message, "no such job");
    const imm = await q.immediate(cfg("imm"));
    await refused(q.delay(imm.key), JobStateError, "IMMEDIATE");
  });

  it("LEASED, DELAYED, DEAD, HELD with their fields", async () => {
    const q = new Queue(ctx.r, qname());
    const gate = "hw 3/é"; // a space and non-ASCII: the field is percent-encoded
    await q.closeGate(gate);
    const held = await q.enqueue(cfg("held", { gate }));
    for (const k of ["run", "retry", "dies"]) await q.enqueue(cfg(k));
    const running = (await q.pop({ leaseMs: 60_000 }))!;
    const retry = (await q.pop({ leaseMs: 60_000 }))!;
    const dies = (await q.pop({ leaseMs: 60_000 }))!;
    const out = await q.nack(retry, { delayMs: 60_000 });
    await withSetting("orca.max-attempts", "1", async () =>
      assert.equal((await q.nack(dies)).outcome, "dead"),
    );
    const want: [string, string, string, string | undefined, number | undefined][] = [
      [running.key, "LEASED", "leased", undefined, undefined],
      [retry.key, "DELAYED", "delayed", undefined, out.retryAt],
      [dies.key, "DEAD", "dead", undefined, undefined],
      [held.key, "HELD", "held", gate, undefined],
    ];
    for (const [key, code, state, g, retryAt] of want) {
      const e = await refused(q.release(key), JobNotQueuedError, code);
      assert.deepEqual([e.state, e.gate, e.retryAt], [state, g, retryAt]);
      assert.ok(e instanceof JobStateError && e.message.startsWith("job is "), e.message);
    }
  });

  it("ALREADYQUEUED", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("d"));
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    await withSetting("orca.max-attempts", "1", () => q.nack(job));
    await q.enqueue(cfg("d")); // a regrade: the key is queued again
    await refused(q.requeueDead(job.key), JobStateError, "ALREADYQUEUED");
  });

  it("NOLEASE and CANCELLED, also per lease in ORCA.MACK", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("a"));
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    const lost = await refused(q.ack({ key: job.key, lease: "999999" }), LeaseLostError, "NOLEASE");
    assert.match(lost.message, /^lease not held/);
    const { outcomes } = await q.ackMany([{ key: job.key, lease: "999999" }]);
    assert.ok(outcomes[0] instanceof LeaseLostError && outcomes[0].code === "NOLEASE");
    await q.delete(job.key);
    const gone = await refused(q.ack(job), JobCancelledError, "CANCELLED");
    assert.equal(gone.message, "job was cancelled");
  });

  it("QUEUEFULL, TOOLARGE, TOOMANY, TIMERANGE", async () => {
    const q = new Queue(ctx.r, qname());
    await q.enqueue(cfg("one"));
    await withSetting("orca.max-queue-length", "1", () =>
      refused(q.enqueue(cfg("two")), QueueFullError, "QUEUEFULL"),
    );
    const job = (await q.pop({ leaseMs: 60_000 }))!;
    await withSetting("orca.max-payload-bytes", "1000", () =>
      refused(q.ack(job, { result: Buffer.alloc(2000) }), ResultTooLargeError, "TOOLARGE"),
    );
    await q.ack(job); // refused whole: the lease was still held
    const many = await withSetting("orca.max-pop-count", "3", () =>
      refused(q.listPage({ limit: 4 }), InvalidArgumentError, "TOOMANY"),
    );
    assert.equal(many.message, "LIMIT must be between 0 and 3");
    await q.enqueue(cfg("t"));
    await refused(q.pop({ leaseMs: 2 ** 53 - 1 }), InvalidArgumentError, "TIMERANGE");
  });

  it("CORRUPT", async () => {
    const raw = await ctx.r.call("ORCA.IMPORT", qname(), "not a queue").catch((x: unknown) => x);
    const e = mapError(raw);
    assert.ok(e instanceof InvalidArgumentError && e.code === "CORRUPT", String(e));
    assert.match(e.message, /^corrupt queue data/);
  });

  it("INTERNAL", async () => {
    const s = await Server.start("debug-panic-in", "command");
    const c = s.client();
    try {
      await refused(new Queue(c, "q").len(), OrcaError, "INTERNAL");
    } finally {
      c.disconnect();
      s.stop();
    }
  });

  it("INVARIANT, NOTQUEUED and a code added later, by their form", () => {
    const cases: [string, new (...a: never[]) => OrcaError, string][] = [
      ["INVARIANT queue invariant broken: x", InvariantError, "INVARIANT"],
      ["NOTQUEUED job is not in the queue order", JobNotQueuedError, "NOTQUEUED"],
      ["SOMEDAY a code added later", InvalidArgumentError, "SOMEDAY"],
    ];
    for (const [reply, cls, code] of cases) {
      const e = mapError(new ReplyError(reply));
      assert.ok(e instanceof OrcaError && e.constructor === cls && e.code === code, reply);
      assert.equal(e.reply, reply);
    }
    const nq = mapError(new ReplyError("NOTQUEUED job is not in the queue order")) as JobNotQueuedError;
    assert.equal(nq.state, undefined);
  });
});

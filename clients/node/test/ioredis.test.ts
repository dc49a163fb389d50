/**
 * The user's own ioredis: commands are built by the client's own `Command` class and given to
 * its `sendCommand`, whatever copy (or major, 5 or 6) of ioredis the user has. This file runs
 * against the client's dev install (ioredis 5) and again against compat/ioredis6.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import Redis from "ioredis";

import { Queue, Worker } from "../src";
import { cfg, fileServer, qname, waitFor } from "./server";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const version = (require("ioredis/package.json") as { version: string }).version;

describe(`the user's ioredis (${version})`, () => {
  const ctx = fileServer();

  it("builds every command with the client's own Command class", async () => {
    // Another Command class than the one this package could import: what a second copy of
    // ioredis (another major, a monorepo, a folder install) gives the user's client.
    const made: unknown[] = [];
    class TheirCommand extends Redis.Command {
      constructor(...args: ConstructorParameters<typeof Redis.Command>) {
        super(...args);
        made.push(this);
      }
    }
    class TheirRedis extends Redis {
      static override Command = TheirCommand;
    }
    const sent: unknown[] = [];
    const client = new TheirRedis({ host: "127.0.0.1", port: ctx.server.port });
    const original = client.sendCommand.bind(client);
    client.sendCommand = (c, ...rest) => {
      sent.push(c);
      return original(c, ...rest);
    };
    try {
      const q = new Queue(client, qname());
      await q.enqueue(cfg("a"));
      const job = await q.pop({ leaseMs: 60_000 });
      assert.ok(job);
      await q.ack(job, { result: { ok: 1 } });
      assert.deepEqual(JSON.parse(String(await q.result(job.key))), { ok: 1 });
      const ours = sent.filter((c) =>
        String((c as { name: string }).name)
          .toLowerCase()
          .startsWith("orca."),
      );
      assert.ok(ours.length >= 4, `ORCA commands sent: ${ours.length}`);
      for (const c of ours) assert.ok(c instanceof TheirCommand, "an ORCA command of another class");
      assert.ok(made.length > 0);
    } finally {
      client.disconnect();
    }
  });

  it("sends through sendCommand with its Command class, not through call()", async () => {
    const client = ctx.server.client();
    const viaCall: unknown[] = [];
    const sent: unknown[] = [];
    const c = client as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const m of ["call", "callBuffer"]) {
      const original = c[m]!.bind(client);
      c[m] = (...a: unknown[]) => {
        viaCall.push(a[0]);
        return original(...a);
      };
    }
    const original = client.sendCommand.bind(client);
    client.sendCommand = (cmd, ...rest) => {
      sent.push(cmd);
      return original(cmd, ...rest);
    };
    try {
      const q = new Queue(client, qname());
      await q.enqueue(cfg("b"));
      assert.equal(await q.len(), 1);
      assert.deepEqual(viaCall, []);
      assert.ok(sent.length >= 2 && sent.every((x) => x instanceof Redis.Command));
    } finally {
      client.disconnect();
    }
  });

  it("runs a Worker on it", async () => {
    const q = new Queue(ctx.r, qname());
    for (let i = 0; i < 20; i++) await q.enqueue(cfg(`w${i}`));
    const seen = new Set<string>();
    const w = new Worker(q, (job) => void seen.add(job.key), { concurrency: 4, handleSignals: false });
    try {
      await waitFor(() => seen.size === 20);
      await waitFor(async () => (await q.stats()).leased === 0);
    } finally {
      await w.close();
    }
    assert.equal(w.counts.completed, 20);
  });
});

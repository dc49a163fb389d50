/**
 * Deployments for the tests. A Redis Cluster: `masters` servers with the module and `--cluster-enabled yes`
 * on free 127.0.0.1 ports, joined by `redis-cli --cluster create`; `migrate(key, to)` moves a
 * key's slot to another node (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) with a pause
 * in which clients meet ASK. A master with replicas under three Sentinels. Every server is
 * killed by its pid in `close()`.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import calculateSlot from "cluster-key-slot";
import Redis, { Cluster } from "ioredis";

import { Server, freePort, waitFor } from "./server";

const REDIS_CLI = process.env.REDIS_CLI ?? "redis-cli";
const run = promisify(execFile);

export class ClusterSet {
  private constructor(readonly nodes: Server[]) {}

  static async start(masters = 3): Promise<ClusterSet> {
    const nodes: Server[] = [];
    try {
      for (let i = 0; i < masters; i++) {
        const bus = String(await freePort());
        nodes.push(
          await Server.start(
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            bus,
            "--cluster-node-timeout",
            "5000",
          ),
        );
      }
      const { stdout } = await run(
        REDIS_CLI,
        [
          "--cluster",
          "create",
          ...nodes.map((n) => `127.0.0.1:${n.port}`),
          "--cluster-replicas",
          "0",
          "--cluster-yes",
        ],
        { timeout: 60_000 },
      );
      if (!stdout.includes("All 16384 slots covered")) throw new Error(`cluster create failed:\n${stdout}`);
      const set = new ClusterSet(nodes);
      await set.waitOk();
      return set;
    } catch (e) {
      for (const n of nodes) n.stop();
      throw e;
    }
  }

  async waitOk(): Promise<void> {
    for (const n of this.nodes) {
      const c = n.client();
      try {
        await waitFor(async () => {
          const info = String(await c.call("CLUSTER", "INFO"));
          return (
            info.includes("cluster_state:ok") &&
            info.includes(`cluster_known_nodes:${this.nodes.length}`) &&
            info.includes("cluster_slots_ok:16384")
          );
        }, 30_000);
      } finally {
        c.disconnect();
      }
    }
  }

  client(): Cluster {
    return new Cluster(this.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })));
  }

  /** The node that serves `key`'s slot. */
  async owner(key: string): Promise<Server> {
    const slot = calculateSlot(key);
    const c = this.nodes[0]!.client();
    try {
      const slots = (await c.call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
      const port = slots.find(([a, b]) => a <= slot && slot <= b)?.[2][1];
      const node = this.nodes.find((n) => n.port === Number(port));
      if (!node) throw new Error(`no node serves slot ${slot}`);
      return node;
    } finally {
      c.disconnect();
    }
  }

  private async id(n: Server): Promise<string> {
    const c = n.client();
    try {
      return String(await c.call("CLUSTER", "MYID"));
    } finally {
      c.disconnect();
    }
  }

  /** Moves `key`'s slot (every key in it) to `to`, pausing `pauseMs` before the final SETSLOT. */
  async migrate(key: string, to: Server, pauseMs = 0): Promise<void> {
    const src = await this.owner(key);
    const slot = calculateSlot(key);
    const [srcId, dstId] = [await this.id(src), await this.id(to)];
    const s = src.client();
    const d = to.client();
    try {
      await d.call("CLUSTER", "SETSLOT", slot, "IMPORTING", srcId);
      await s.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dstId);
      for (;;) {
        const keys = (await s.call("CLUSTER", "GETKEYSINSLOT", slot, 100)) as string[];
        if (keys.length === 0) break;
        await s.call("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", ...keys);
      }
      await new Promise((r) => setTimeout(r, pauseMs));
      for (const n of [to, src, ...this.nodes.filter((x) => x !== to && x !== src)]) {
        const c = n.client();
        await c.call("CLUSTER", "SETSLOT", slot, "NODE", dstId).finally(() => c.disconnect());
      }
    } finally {
      s.disconnect();
      d.disconnect();
    }
    await this.waitOk();
  }

  close(): void {
    for (const n of this.nodes) n.stop();
  }
}

const REDIS_SERVER = process.env.REDIS_SERVER ?? "redis-server";

/** A Sentinel (`redis-server <conf> --sentinel`) on a free port, in a directory of its own. */
class SentinelNode {
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly proc: ChildProcess,
  ) {}

  static async start(conf: string): Promise<SentinelNode> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "orca-node-sentinel-"));
    writeFileSync(join(dir, "sentinel.conf"), conf);
    const proc = spawn(
      REDIS_SERVER,
      [join(dir, "sentinel.conf"), "--sentinel", "--port", String(port), "--bind", "127.0.0.1", "--dir", dir],
      { stdio: "ignore" },
    );
    const node = new SentinelNode(port, dir, proc);
    await waitFor(async () => {
      const c = new Redis({ port, host: "127.0.0.1", lazyConnect: true, retryStrategy: () => null });
      c.on("error", () => {});
      try {
        await c.connect();
        return (await c.call("PING")) === "PONG";
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    });
    return node;
  }

  stop(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One master, `replicas` replicas and three Sentinels watching it as `name`. */
export class SentinelSet {
  private constructor(
    readonly name: string,
    readonly master: Server,
    readonly replicas: Server[],
    private readonly sentinels: SentinelNode[],
  ) {}

  static async start(name = "orca", replicas = 2): Promise<SentinelSet> {
    const master = await Server.start("--repl-diskless-sync-delay", "0");
    const reps: Server[] = [];
    for (let i = 0; i < replicas; i++) {
      const r = await Server.start("--replicaof", "127.0.0.1", String(master.port));
      const c = r.client();
      await waitFor(async () => /master_link_status:up/.test(await c.info("replication")), 30_000);
      c.disconnect();
      reps.push(r);
    }
    const conf =
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 2\n` +
      `sentinel down-after-milliseconds ${name} 1000\n` +
      `sentinel failover-timeout ${name} 10000\n`;
    const sentinels = [
      await SentinelNode.start(conf),
      await SentinelNode.start(conf),
      await SentinelNode.start(conf),
    ];
    const set = new SentinelSet(name, master, reps, sentinels);
    for (const s of sentinels) {
      const c = new Redis({ port: s.port, host: "127.0.0.1" });
      await waitFor(async () => {
        const info = String(await c.call("INFO", "sentinel"));
        return info.includes(`slaves=${replicas},sentinels=3`);
      }, 30_000);
      c.disconnect();
    }
    return set;
  }

  get sentinelAddresses(): { host: string; port: number }[] {
    return this.sentinels.map((s) => ({ host: "127.0.0.1", port: s.port }));
  }

  /** The port Sentinel names as the master now. */
  async masterPort(): Promise<number> {
    const c = new Redis({ port: this.sentinels[0]!.port, host: "127.0.0.1" });
    try {
      const [, port] = (await c.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", this.name)) as [string, string];
      return Number(port);
    } finally {
      c.disconnect();
    }
  }

  close(): void {
    for (const s of this.sentinels) s.stop();
    for (const n of [this.master, ...this.replicas]) n.stop();
  }
}

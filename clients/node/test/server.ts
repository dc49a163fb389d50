/**
 * Real redis-server processes with the built Orca module, on free ports, for the tests.
 * The module is $ORCA_MODULE or <repo>/target/release/liborca.so; the server $REDIS_SERVER
 * or redis-server. Each server has its own temp dir and is killed by its pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before } from "node:test";
import Redis, { type RedisOptions } from "ioredis";

// The repository root: the nearest directory above this file with a Cargo.toml.
function repoRoot(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "Cargo.toml"))) return dir;
    if (dirname(dir) === dir) return resolve(__dirname, "../../../..");
  }
}
const REPO = repoRoot();
export const MODULE = process.env.ORCA_MODULE ?? join(REPO, "target/release/liborca.so");
const REDIS_SERVER = process.env.REDIS_SERVER ?? "redis-server";

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => (typeof addr === "object" && addr ? res(addr.port) : rej(new Error("no port"))));
    });
  });
}

export class Server {
  private constructor(
    readonly port: number,
    readonly dir: string,
    private proc: ChildProcess,
    private readonly args: string[] = [],
  ) {}

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** SIGKILL (nothing saved beyond what is on disk); the directory stays for restart(). */
  kill(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
  }

  /** Starts the server again on its port and directory (an AOF written before is loaded). */
  async restart(): Promise<void> {
    this.kill();
    await new Promise((r) => setTimeout(r, 100));
    this.proc = spawn(REDIS_SERVER, this.args, { stdio: "ignore" });
    await waitFor(async () => {
      const c = this.client({ retryStrategy: () => null, lazyConnect: true });
      c.on("error", () => {});
      try {
        await c.connect();
        return (await c.info("server")).includes(`process_id:${this.proc.pid}\r\n`);
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    });
  }

  static async start(...moduleArgs: string[]): Promise<Server> {
    if (!existsSync(MODULE))
      throw new Error(`orca module not found at ${MODULE}: run cargo build --release or set ORCA_MODULE`);
    // A free port may be taken by another test file's server (node --test
    // runs files in parallel) before ours binds it: a server counts only
    // if INFO names our process, else try another port.
    for (let attempt = 0; ; attempt++) {
      const server = await Server.tryStart(await freePort(), moduleArgs);
      if (server) return server;
      if (attempt >= 4) throw new Error("redis-server did not start");
    }
  }

  private static async tryStart(port: number, moduleArgs: string[]): Promise<Server | null> {
    const dir = mkdtempSync(join(tmpdir(), "orca-node-"));
    const args = [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--logfile",
      join(dir, "server.log"),
      "--loadmodule",
      MODULE,
      ...moduleArgs,
    ];
    const proc = spawn(REDIS_SERVER, args, { stdio: "ignore" });
    const server = new Server(port, dir, proc, args);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const c = server.client({ retryStrategy: () => null, lazyConnect: true });
      c.on("error", () => {});
      try {
        await c.connect();
        const info = await c.info("server");
        c.disconnect();
        if (info.includes(`process_id:${proc.pid}\r\n`)) return server;
        // Another server answers on this port.
        server.stop();
        return null;
      } catch {
        c.disconnect();
        if (proc.exitCode !== null || Date.now() > deadline) {
          server.stop();
          return null;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  client(opts: RedisOptions = {}): Redis {
    return new Redis({ host: "127.0.0.1", port: this.port, ...opts });
  }

  stop(): void {
    this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let n = 0;
export const qname = () => `q-${process.pid}-${Date.now().toString(36)}-${n++}`;
export const cfg = (key: string, extra: Record<string, unknown> = {}) => ({
  key,
  response_url: `http://cb/${key}`,
  ...extra,
});

export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** How many times the server ran `command` (lower case) since its last CONFIG RESETSTAT. */
export async function calls(client: Redis, command: string): Promise<number> {
  const line = (await client.info("commandstats"))
    .split("\n")
    .find((l) => l.startsWith(`cmdstat_${command}:`));
  return Number(/calls=(\d+)/.exec(line ?? "")?.[1] ?? 0);
}

/**
 * The commands `server` runs from now until `stop()`, by name (MONITOR). INFO commandstats counts
 * the same on Redis, but Valkey 8 counts a module command that blocked (`ORCA.POP ... BLOCK`,
 * `MACK ... NEXT BLOCK`) twice, when it blocks and again when it is served; MONITOR shows each
 * command once, as the client sent it.
 */
export async function monitorCommands(server: Server): Promise<{ stop(): Promise<Map<string, number>> }> {
  const END = "orca-tests-monitor-end";
  const base = server.client();
  const monitor = await base.monitor(); // a connection of its own in monitor mode
  const names = new Map<string, number>();
  let ended = (): void => {};
  const end = new Promise<void>((res) => (ended = res));
  monitor.on("monitor", (_time: string, args: string[]) => {
    const name = String(args[0]).toLowerCase();
    if (name === "echo" && args[1] === END) return ended();
    names.set(name, (names.get(name) ?? 0) + 1);
  });
  return {
    async stop() {
      const c = server.client();
      await c.echo(END);
      await end;
      c.disconnect();
      monitor.disconnect();
      base.disconnect();
      return names;
    },
  };
}

/** A server for the whole test file (started before its tests, stopped after) and a client on it. */
export function fileServer(): { server: Server; r: Redis } {
  const ctx = {} as { server: Server; r: Redis };
  before(async () => {
    ctx.server = await Server.start();
    ctx.r = ctx.server.client();
  });
  after(() => {
    ctx.r.disconnect();
    ctx.server.stop();
  });
  return ctx;
}

export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

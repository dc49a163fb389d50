/**
 * A real HTTP server on 127.0.0.1 for the notifier tests: it answers each POST as its script
 * says (a status, a stall, a Retry-After), records what it received, and can go away and come
 * back on the same port.
 */
import { createServer, type Server as HttpServer } from "node:http";

import { freePort } from "./server";

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  stallMs?: number;
}

export interface Received {
  path: string;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
  at: number;
}

export class CallbackServer {
  readonly received: Received[] = [];
  private http: HttpServer | undefined;
  private constructor(
    readonly port: number,
    private readonly script: (path: string, n: number) => Reply,
  ) {}

  static async start(script: (path: string, n: number) => Reply = () => ({})): Promise<CallbackServer> {
    const s = new CallbackServer(await freePort(), script);
    await s.listen();
    return s;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  posts(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  listen(): Promise<void> {
    const http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "";
        const n = this.posts(path).length;
        const text = Buffer.concat(chunks).toString();
        this.received.push({
          path,
          body: text ? JSON.parse(text) : undefined,
          headers: req.headers,
          at: Date.now(),
        });
        const reply = this.script(path, n);
        setTimeout(() => {
          if (res.destroyed) return;
          res.writeHead(reply.status ?? 200, { ...reply.headers, "content-length": "0" });
          res.end();
        }, reply.stallMs ?? 0);
      });
    });
    http.keepAliveTimeout = 1000;
    this.http = http;
    return new Promise((res) => http.listen(this.port, "127.0.0.1", () => res()));
  }

  /** Go away: connections are refused until `listen()` again. */
  stop(): Promise<void> {
    const http = this.http;
    this.http = undefined;
    if (!http) return Promise.resolve();
    http.closeAllConnections();
    return new Promise((res) => http.close(() => res()));
  }
}

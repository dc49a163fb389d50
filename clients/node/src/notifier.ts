/**
 * The callback notifier: a worker that tells submitters their results. A pipeline's last stage
 * forwards each verdict to a callback queue (`ORCA.ACK ... FORWARD`); `new Notifier(queue)`
 * consumes it: for each job it POSTs the config's `body` (or, without one, the whole config) as
 * JSON to the config's `response_url`, with Node's built-in fetch and a timeout. A 2xx reply
 * acks the job (its result is `{"status": <code>}`). Anything else NACKs it, so it is retried
 * with the queue's backoff, or at the time a 429 or 503 reply's `Retry-After` asks for; after
 * the queue's attempts (`orca.max-attempts`) it is a dead letter whose failure text says the
 * last status (`HTTP 503`, `timeout after 10000 ms`, `connection error: ...`). A callback is
 * acked only after a 2xx: none is ever dropped. It is a `Worker` (heartbeats, events, graceful
 * `close()` and SIGTERM): a close lets the POSTs in flight finish (their timeout bounds it).
 */
import { JobFailed } from "./errors";
import type { Queue } from "./queue";
import type { Job } from "./types";
import { Worker, type WorkerOptions } from "./worker";

/** A Retry-After beyond this is capped (a day). */
export const MAX_RETRY_AFTER_MS = 86_400_000;

/** A callback the receiver did not accept: `status` is the HTTP status (undefined for a
 * timeout or a connection error); `delayMs` the retry it asked for. */
export class CallbackFailed extends JobFailed {
  readonly status: number | undefined;
  constructor(message: string, options: { status?: number; delayMs?: number } = {}) {
    super(message, { delayMs: options.delayMs });
    this.name = "CallbackFailed";
    this.status = options.status;
  }
}

/** A `Retry-After` header's delay in ms: delta-seconds or an HTTP date; undefined if absent or
 * unreadable. Never negative, at most a day. */
export function retryAfterMs(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  if (!/[a-z]/i.test(v)) return undefined;
  const when = Date.parse(v);
  if (Number.isNaN(when)) return undefined;
  return Math.min(Math.max(0, when - now), MAX_RETRY_AFTER_MS);
}

/** [url, JSON body] of a callback job; a config without an http(s) `response_url` cannot be
 * delivered: `CallbackFailed` (retried, then a dead letter: never dropped). */
export function callbackRequest(job: Job): [string, unknown] {
  let config: unknown;
  try {
    config = job.config;
  } catch {
    throw new CallbackFailed("callback config is not JSON");
  }
  if (typeof config !== "object" || config === null || Array.isArray(config))
    throw new CallbackFailed("callback config is not a JSON object");
  const c = config as Record<string, unknown>;
  const url = c.response_url;
  if (typeof url !== "string" || !/^https?:\/\//.test(url))
    throw new CallbackFailed("callback config has no http(s) response_url");
  return [url, "body" in c ? c.body : c];
}

export interface NotifierOptions extends WorkerOptions {
  /** Of each POST, from the request to the whole reply (default 10000 ms). */
  timeoutMs?: number;
  /** Added to every request (e.g. a shared secret). */
  headers?: Record<string, string>;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

export class Notifier extends Worker {
  readonly timeoutMs: number;

  /** Delivers the callbacks of `queue`. `concurrency` defaults to 8 (callbacks wait on the
   * network); the lease must be longer than the timeout. */
  constructor(queue: Queue, opts: NotifierOptions = {}) {
    const { timeoutMs = 10_000, headers = {}, fetch: fetchFn = fetch, ...workerOpts } = opts;
    if (!(Number.isSafeInteger(timeoutMs) && timeoutMs > 0))
      throw new RangeError("timeoutMs must be an integer > 0");
    if ((workerOpts.leaseMs ?? 300_000) <= timeoutMs)
      throw new RangeError("leaseMs must be longer than timeoutMs");
    const deliver = async (job: Job): Promise<{ status: number }> => {
      const [url, body] = callbackRequest(job);
      let res: Response;
      try {
        res = await fetchFn(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify(body),
          redirect: "manual",
          signal: AbortSignal.timeout(timeoutMs),
        });
        // The whole reply within the timeout, so the connection can be reused.
        await res.arrayBuffer();
      } catch (e) {
        const name = (e as { name?: string }).name;
        if (name === "TimeoutError" || name === "AbortError")
          throw new CallbackFailed(`timeout after ${timeoutMs} ms`);
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        throw new CallbackFailed(`connection error: ${cause?.code ?? cause?.message ?? String(e)}`);
      }
      if (res.status >= 200 && res.status < 300) return { status: res.status };
      const delayMs =
        res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get("retry-after")) : undefined;
      throw new CallbackFailed(`HTTP ${res.status}`, { status: res.status, delayMs });
    };
    super(queue, deliver, { concurrency: 8, ...workerOpts });
    this.timeoutMs = timeoutMs;
  }
}

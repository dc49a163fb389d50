/**
 * Typed replies of the ORCA.* commands, decoded from RESP2 flat arrays (what ioredis gives)
 * or RESP3 maps (a `Map` or a plain object, as other clients give) alike.
 */

type Reply = unknown;

function str(v: Reply): string {
  return Buffer.isBuffer(v) ? v.toString("utf8") : String(v);
}
function num(v: Reply): number {
  return typeof v === "number" ? v : Number(str(v));
}
function optNum(v: Reply): number | undefined {
  return v === null || v === undefined ? undefined : num(v);
}
function optStr(v: Reply): string | undefined {
  return v === null || v === undefined ? undefined : str(v);
}

/** Calls `f(field, value)` for every pair of a RESP2 flat array or a RESP3 map. */
export function eachField(reply: Reply, f: (field: string, value: Reply) => void): void {
  if (Array.isArray(reply)) {
    if (reply.length % 2) throw new TypeError(`expected field/value pairs, got ${reply.length} elements`);
    for (let i = 0; i < reply.length; i += 2) f(str(reply[i]), reply[i + 1]);
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) f(str(k), v);
  } else if (reply !== null && typeof reply === "object" && !Buffer.isBuffer(reply)) {
    for (const [k, v] of Object.entries(reply)) f(k, v);
  } else {
    throw new TypeError(`expected a map or a field/value array, got ${typeof reply}`);
  }
}

/** Field/value pairs as an object. */
export function fields(reply: Reply): Record<string, Reply> {
  const out: Record<string, Reply> = {};
  eachField(reply, (k, v) => {
    out[k] = v;
  });
  return out;
}

export interface LeaseInfo {
  lease: string;
  deadline: number;
  attempts: number;
}

/**
 * A job as the server describes it (POP, STATUS, LIST, DEAD LIST or a write reply).
 * `payload` is the config exactly as given (undefined in the write replies, which do not echo
 * it); `config` is it parsed as JSON. A Worker sets `abandoned` and aborts `signal` when this
 * delivery's result will be dropped (lease lost, job cancelled, handed back at shutdown).
 */
export class Job {
  key = "";
  attempts = 0;
  collation: string | undefined = undefined;
  createdAt = 0;
  releaseAt = 0;
  immediate = false;
  nonce = 0;
  payload: string | undefined = undefined;
  attempt: number | undefined = undefined;
  lease: string | undefined = undefined;
  deadline: number | undefined = undefined;
  created: boolean | undefined = undefined;
  state: string | undefined = undefined;
  position: number | undefined = undefined;
  retryAt: number | undefined = undefined;
  diedAt: number | undefined = undefined;
  cause: string | undefined = undefined;
  leases: LeaseInfo[] = [];
  queue: string | undefined = undefined;
  abandoned: string | undefined = undefined;
  private parsed: unknown = undefined;
  private controller: AbortController | undefined = undefined;

  /** The payload parsed as JSON (parsed once). */
  get config(): unknown {
    if (this.parsed === undefined && this.payload !== undefined) this.parsed = JSON.parse(this.payload);
    return this.parsed;
  }

  /** Aborted when a Worker drops this delivery's result. */
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    return this.controller.signal;
  }

  /** Marks the delivery abandoned (first reason wins); false if it already was. */
  abandon(reason: string): boolean {
    if (this.abandoned !== undefined) return false;
    this.abandoned = reason;
    this.controller?.abort(new Error(reason));
    return true;
  }

  static fromReply(reply: Reply, queue?: string): Job {
    const j = new Job();
    j.queue = queue;
    eachField(reply, (k, v) => {
      switch (k) {
        case "key":
          j.key = str(v);
          break;
        case "attempts":
          j.attempts = num(v);
          break;
        case "collation":
          j.collation = optStr(v);
          break;
        case "created_at":
          j.createdAt = num(v);
          break;
        case "release_at":
          j.releaseAt = num(v);
          break;
        case "immediate":
          j.immediate = num(v) === 1;
          break;
        case "nonce":
          j.nonce = num(v);
          break;
        case "payload":
          j.payload = optStr(v);
          break;
        case "attempt":
          j.attempt = optNum(v);
          break;
        case "lease":
          j.lease = optStr(v);
          break;
        case "deadline":
          j.deadline = optNum(v);
          break;
        case "created":
          j.created = v === null || v === undefined ? undefined : num(v) === 1;
          break;
        case "state":
          j.state = optStr(v);
          break;
        case "position":
          j.position = optNum(v);
          break;
        case "retry_at":
          j.retryAt = optNum(v);
          break;
        case "died_at":
          j.diedAt = optNum(v);
          break;
        case "cause":
          j.cause = optStr(v);
          break;
        case "leases":
          j.leases = ((v as Reply[] | null) ?? []).map((x) => {
            const f = fields(x);
            return { lease: str(f.lease), deadline: num(f.deadline), attempts: num(f.attempts) };
          });
          break;
        default:
          break; // fields added by newer servers are ignored
      }
    });
    if (!j.key) throw new TypeError("job reply without a 'key' field");
    return j;
  }
}

const utf8 = (b: unknown): string => (Buffer.isBuffer(b) ? b.toString("utf8") : String(b));
const optUtf8 = (b: unknown): string | undefined => (b === null || b === undefined ? undefined : utf8(b));

/**
 * A popped job from a reply read with Buffers (ioredis `callBuffer`): the worker's hot path.
 * Field names are told apart by length and first byte, so only values become strings.
 * Fields it does not expect go through `fromReply`.
 */
export function popFromBuffers(reply: unknown, queue: string): Job {
  if (!Array.isArray(reply) || reply.length % 2) return Job.fromReply(reply, queue);
  const j = new Job();
  j.queue = queue;
  for (let i = 0; i < reply.length; i += 2) {
    const f = reply[i] as Buffer;
    const v = reply[i + 1];
    const c = f[0];
    switch (f.length) {
      case 3:
        j.key = utf8(v);
        continue; // key
      case 5:
        if (c === 0x6c) {
          j.lease = optUtf8(v);
          continue;
        } // lease
        if (c === 0x6e) {
          j.nonce = num(v);
          continue;
        } // nonce
        break;
      case 7:
        if (c === 0x61) {
          j.attempt = optNum(v);
          continue;
        } // attempt
        if (c === 0x70) {
          j.payload = optUtf8(v);
          continue;
        } // payload
        break;
      case 8:
        if (c === 0x61) {
          j.attempts = num(v);
          continue;
        } // attempts
        if (c === 0x64) {
          j.deadline = optNum(v);
          continue;
        } // deadline
        break;
      case 9:
        if (c === 0x63) {
          j.collation = optUtf8(v);
          continue;
        } // collation
        if (c === 0x69) {
          j.immediate = num(v) === 1;
          continue;
        } // immediate
        break;
      case 10:
        if (c === 0x63) {
          j.createdAt = num(v);
          continue;
        } // created_at
        if (c === 0x72) {
          j.releaseAt = num(v);
          continue;
        } // release_at
        break;
    }
    return Job.fromReply(reply, queue); // a field this fast path does not know
  }
  if (!j.key) throw new TypeError("job reply without a 'key' field");
  return j;
}

/** An array of job replies (POP with COUNT, LIST, DEAD LIST); nil is empty. */
export function jobsFromReply(reply: Reply, queue?: string): Job[] {
  if (reply === null || reply === undefined) return [];
  return (reply as Reply[]).map((x) => Job.fromReply(x, queue));
}

export interface NackOutcome {
  outcome: "retry" | "dead" | "superseded";
  retryAt?: number;
  attempts?: number;
}
export function nackFromReply(reply: Reply): NackOutcome {
  const f = fields(reply);
  const out: NackOutcome = { outcome: str(f.outcome) as NackOutcome["outcome"] };
  if (f.retry_at !== undefined) out.retryAt = num(f.retry_at);
  if (f.attempts !== undefined) out.attempts = num(f.attempts);
  return out;
}

export interface WaitStats {
  count: number;
  avg: number | null;
  min: number | null;
  max: number | null;
}
export interface QueueStats {
  order: string;
  queued: number;
  delayed: number;
  leased: number;
  dead: number;
  results: number;
  collations: number;
  immediate: number;
  waitAll: WaitStats;
  waitReleased: WaitStats;
}
function waitStats(reply: Reply): WaitStats {
  const f = fields(reply);
  const n = (v: Reply) => optNum(v) ?? null;
  return { count: num(f.count), avg: n(f.avg), min: n(f.min), max: n(f.max) };
}
export function statsFromReply(reply: Reply): QueueStats {
  const f = fields(reply);
  return {
    order: str(f.order),
    queued: num(f.queued),
    delayed: num(f.delayed),
    leased: num(f.leased),
    dead: num(f.dead),
    results: num(f.results),
    collations: num(f.collations),
    immediate: num(f.immediate),
    waitAll: waitStats(f.wait_all),
    waitReleased: waitStats(f.wait_released),
  };
}

export interface QueueSettings {
  order: string;
  jobs: number;
  collations: number;
}
export function settingsFromReply(reply: Reply): QueueSettings {
  const f = fields(reply);
  return { order: str(f.order), jobs: num(f.jobs), collations: num(f.collations) };
}

export interface TickReport {
  died: number;
  expired: number;
  forgotten: number;
  retried: number;
}
export function tickFromReply(reply: Reply): TickReport {
  const f = fields(reply);
  return { died: num(f.died), expired: num(f.expired), forgotten: num(f.forgotten), retried: num(f.retried) };
}

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
  /** Who took it (`WORKER` of the pop) and when it was handed out (ms). */
  worker?: string;
  startedAt?: number;
}

/**
 * A job as the server describes it (POP, MPOP, ACK/NACK ... NEXT, STATUS, LIST, DEAD LIST or a
 * write reply). `payload` is the config exactly as given (undefined in the write replies, which
 * do not echo it); `config` is it parsed as JSON. `state` is `queued`, `held`, `delayed`,
 * `leased` or `dead`; a held job names its `gate`; `capped` is true for a queued job that waits
 * only because its collation is at the queue's running cap; `delay` is the automatic delay a
 * write gave (when the queue has one). `queue` names the queue it came from. A running job names
 * its `worker` (`WORKER` of the pop; a Worker sends `host:pid[:name]`) and `startedAt`; a job whose
 * last attempt failed carries that failure's `error` (`ORCA.NACK ... ERROR`); a finished job whose
 * result is kept has `state` `done` and `finishedAt`. A Worker sets
 * `abandoned` and aborts `signal` when this delivery's result will be dropped (lease lost, job
 * cancelled, handed back at shutdown).
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
  gate: string | undefined = undefined;
  capped: boolean | undefined = undefined;
  delay: number | undefined = undefined;
  queue: string | undefined = undefined;
  worker: string | undefined = undefined;
  startedAt: number | undefined = undefined;
  error: string | undefined = undefined;
  finishedAt: number | undefined = undefined;
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
        case "gate":
          j.gate = optStr(v);
          break;
        case "capped":
          j.capped = v === null || v === undefined ? undefined : num(v) === 1;
          break;
        case "delay":
          j.delay = optNum(v);
          break;
        case "queue":
          j.queue = optStr(v) ?? queue;
          break;
        case "worker":
          j.worker = optStr(v);
          break;
        case "started_at":
          j.startedAt = optNum(v);
          break;
        case "error":
          j.error = optStr(v);
          break;
        case "finished_at":
          j.finishedAt = optNum(v);
          break;
        case "leases":
          j.leases = ((v as Reply[] | null) ?? []).map((x) => {
            const f = fields(x);
            return {
              lease: str(f.lease),
              deadline: num(f.deadline),
              attempts: num(f.attempts),
              worker: optStr(f.worker),
              startedAt: optNum(f.started_at),
            };
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
 * `queue` is the queue it was popped from, unless the reply names one (ORCA.MPOP).
 * Field names are told apart by length and first byte, so only values become strings.
 * Fields it does not expect go through `fromReply`.
 */
export function popFromBuffers(reply: unknown, queue?: string): Job {
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
        if (c === 0x71) {
          j.queue = optUtf8(v) ?? queue;
          continue;
        } // queue (ORCA.MPOP)
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

/**
 * A delivery read with `FORMAT VALUES` (Buffers): the delivery map's values without their names,
 * in the map's order, and (`mpop`) the queue last (docs/commands.md). Values past these (a newer
 * server's) are ignored. `queue` is the queue it was popped from, for POP and NEXT.
 */
export function popFromValues(reply: unknown, queue: string | undefined, mpop: boolean): Job {
  if (!Array.isArray(reply) || reply.length < (mpop ? 12 : 11))
    throw new TypeError("not a FORMAT VALUES delivery");
  const j = new Job();
  j.attempt = optNum(reply[0] as Reply);
  j.attempts = num(reply[1] as Reply);
  j.collation = optUtf8(reply[2]);
  j.createdAt = num(reply[3] as Reply);
  j.deadline = optNum(reply[4] as Reply);
  j.immediate = num(reply[5] as Reply) === 1;
  j.key = utf8(reply[6]);
  j.lease = optUtf8(reply[7]);
  j.nonce = num(reply[8] as Reply);
  j.payload = optUtf8(reply[9]);
  j.releaseAt = num(reply[10] as Reply);
  j.queue = mpop ? utf8(reply[11]) : queue;
  if (!j.key) throw new TypeError("job reply without a key");
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
  /** `NACK ... FORWARD`: the successor enqueued because the job died. */
  successor?: Job;
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

/**
 * Automatic delay by submission rate (`ORCA.SETTINGS ... AUTODELAY`): a new collation job is
 * delayed by `stepMs` × (the jobs its collation submitted in the `windowMs` before it), at most
 * `capMs` (0 = no cap). `windowMs` 0 is off.
 */
export interface AutoDelay {
  windowMs: number;
  stepMs: number;
  capMs?: number;
}

/**
 * A queue's own settings (ORCA.SETTINGS, and `settings` of ORCA.STATS) with its size: `jobs`
 * queued, `held` behind closed gates, `collations`. `lifetimeMs`: a waiting job not handed out
 * this long after its release time becomes a dead letter (0 = never). `maxRunning`: the running
 * cap per collation (0 = none). `deadMax` / `deadTtlMs`: bounds of the dead-letter list (0 =
 * none). `resultMax`: most kept ACK results (0 = no bound).
 */
export interface QueueSettings {
  order: string;
  lifetimeMs: number;
  autodelay: Required<AutoDelay>;
  maxRunning: number;
  deadMax: number;
  deadTtlMs: number;
  resultMax: number;
  jobs: number;
  held: number;
  collations: number;
}

/** ORCA.SETTINGS options to change (the others stay). */
export interface SettingsChange {
  order?: "lifo" | "fifo" | "LIFO" | "FIFO";
  lifetimeMs?: number;
  /** `{ windowMs: 0, stepMs: 0 }` turns it off. */
  autodelay?: AutoDelay;
  maxRunning?: number;
  deadMax?: number;
  deadTtlMs?: number;
  resultMax?: number;
}

/**
 * ORCA.STATS: counts by state, closed `gates` (gate -> held jobs), the collations with leased
 * jobs (`running`: collation -> leased jobs, the 100 busiest), the queue's `settings` and
 * wait-time statistics.
 */
export interface QueueStats {
  order: string;
  queued: number;
  held: number;
  delayed: number;
  leased: number;
  dead: number;
  results: number;
  collations: number;
  immediate: number;
  gates: Record<string, number>;
  running: Record<string, number>;
  settings: QueueSettings | undefined;
  waitAll: WaitStats;
  waitReleased: WaitStats;
}
function waitStats(reply: Reply): WaitStats {
  const f = fields(reply);
  const n = (v: Reply) => optNum(v) ?? null;
  return { count: num(f.count), avg: n(f.avg), min: n(f.min), max: n(f.max) };
}
function counts(reply: Reply): Record<string, number> {
  const out: Record<string, number> = {};
  if (reply === null || reply === undefined) return out;
  eachField(reply, (k, v) => {
    out[k] = num(v);
  });
  return out;
}
export function statsFromReply(reply: Reply): QueueStats {
  const f = fields(reply);
  const queued = num(f.queued);
  const held = optNum(f.held) ?? 0;
  const collations = num(f.collations);
  return {
    order: str(f.order),
    queued,
    held,
    delayed: num(f.delayed),
    leased: num(f.leased),
    dead: num(f.dead),
    results: num(f.results),
    collations,
    immediate: num(f.immediate),
    gates: counts(f.gates),
    running: counts(f.running),
    settings:
      f.settings === undefined || f.settings === null
        ? undefined
        : settingsFromReply(f.settings, { jobs: queued, held, collations }),
    waitAll: waitStats(f.wait_all),
    waitReleased: waitStats(f.wait_released),
  };
}

/**
 * ORCA.SETTINGS' reply; `size` fills in what the reply lacks (the `settings` map of ORCA.STATS
 * has only the settings).
 */
export function settingsFromReply(
  reply: Reply,
  size: { jobs: number; held: number; collations: number } = { jobs: 0, held: 0, collations: 0 },
): QueueSettings {
  const f = fields(reply);
  const n = (v: Reply) => optNum(v) ?? 0;
  return {
    order: str(f.order),
    lifetimeMs: n(f.lifetime),
    autodelay: { windowMs: n(f.autodelay_window), stepMs: n(f.autodelay_step), capMs: n(f.autodelay_cap) },
    maxRunning: n(f.maxrunning),
    deadMax: n(f.deadmax),
    deadTtlMs: n(f.deadttl),
    resultMax: n(f.resultmax),
    jobs: optNum(f.jobs) ?? size.jobs,
    held: optNum(f.held) ?? size.held,
    collations: optNum(f.collations) ?? size.collations,
  };
}

/** ORCA.TICK: the time-driven changes applied (`lifetime`: waiting jobs whose lifetime ran out, in `died` too). */
export interface TickReport {
  died: number;
  expired: number;
  forgotten: number;
  lifetime: number;
  retried: number;
}
export function tickFromReply(reply: Reply): TickReport {
  const f = fields(reply);
  return {
    died: num(f.died),
    expired: num(f.expired),
    forgotten: num(f.forgotten),
    lifetime: optNum(f.lifetime) ?? 0,
    retried: num(f.retried),
  };
}

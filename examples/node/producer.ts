/**
 * A producer as Orca's orchestrator (the TypeScript web side) would use orca-queue: it sets
 * the queue's grading policies (automatic delay by submission rate, job lifetime, a running cap
 * per student or team), submits grading jobs, regrades (a PUT: the newest config wins, the
 * place is kept), holds submissions whose grader image is still being built (a gate: released
 * when the build succeeds, dropped with each submitter told when it fails), moves urgent ones
 * to the front, cancels, and answers "where is my submission?" and "what is waiting for this
 * course?".
 *
 *   node build/examples/node/producer.js [redis-url] [queue]
 *
 * sets the policies, enqueues sample submissions (one behind an image build), releases the
 * build and prints positions and the queue's stats.
 */
import Redis from "ioredis";
import { Job, OrcaError, Queue, QueueSettings, QueueStats, orcaKey } from "orca-queue";

/** Orca's GradingJobConfig, the fields the queue reads; everything else is passed through. */
export interface GradingJobConfig {
  key: string;
  response_url: string;
  collation?: { type: "user" | "team"; id: string };
  priority?: number; // ms of delay: how far back this submission goes
  metadata_table?: Record<string, string | string[]>;
  gate?: string; // the grader image this job waits for while it is being built
  [field: string]: unknown;
}

export interface Submitted {
  orcaKey: string;
  created: boolean;
  releaseAt: number;
}

export class GradingQueue {
  readonly queue: Queue;

  constructor(redis: Redis, name = "grading") {
    this.queue = new Queue(redis, name);
  }

  /**
   * The grading-queue design's policies, kept by the queue itself: each submission is delayed one
   * minute per submission of the same student/team in the last 15 minutes (at most 10 minutes),
   * a job not handed out within a day of its release time becomes a dead letter (cause
   * `expired`), and one student/team never has more than `maxRunning` jobs graded at once.
   */
  configure(maxRunning = 2): Promise<QueueSettings> {
    return this.queue.settings({
      autodelay: { windowMs: 15 * 60_000, stepMs: 60_000, capMs: 10 * 60_000 },
      lifetimeMs: 24 * 3_600_000,
      maxRunning,
    });
  }

  /**
   * The grader image `image` is being built: submissions naming it (`gate: image`) are held from
   * now on (kept, updatable, cancellable, but never handed out).
   */
  async imageBuilding(image: string): Promise<void> {
    await this.queue.closeGate(image);
  }

  /** The build succeeded: every held submission enters the queue at its arrival time. */
  imageBuilt(image: string): Promise<number> {
    return this.queue.openGate(image);
  }

  /**
   * The build failed: the held submissions are removed; `notify` is called with each one's
   * config so its submitter can be told (POST to its response_url, as Orca does).
   */
  async imageFailed(image: string, notify: (config: GradingJobConfig) => Promise<void>): Promise<number> {
    const dropped = (await this.queue.dropGate(image)) as GradingJobConfig[];
    for (const config of dropped) await notify(config);
    return dropped.length;
  }

  /** A new submission, or a regrade of one already waiting (its place is kept). */
  async submit(config: GradingJobConfig): Promise<Submitted> {
    const job = await this.queue.enqueue(config);
    return { orcaKey: job.key, created: job.created ?? false, releaseAt: job.releaseAt };
  }

  /** Many submissions in one round trip (e.g. "regrade the whole assignment"). */
  async submitAll(configs: GradingJobConfig[]): Promise<(Submitted | OrcaError)[]> {
    const out = await this.queue.enqueueMany(configs);
    return out.map((j) =>
      j instanceof Job ? { orcaKey: j.key, created: j.created ?? false, releaseAt: j.releaseAt } : j,
    );
  }

  /** Staff override: grade this one next. */
  prioritize(config: Pick<GradingJobConfig, "key" | "response_url">): Promise<Job> {
    return this.queue.release(orcaKey(config.key, config.response_url));
  }

  /** Staff override: to the back of the queue. */
  deprioritize(config: Pick<GradingJobConfig, "key" | "response_url">): Promise<Job> {
    return this.queue.delay(orcaKey(config.key, config.response_url));
  }

  /** Withdraw a submission; a running grade is cancelled (its worker's result is dropped). */
  cancel(config: Pick<GradingJobConfig, "key" | "response_url">): Promise<boolean> {
    return this.queue.delete(orcaKey(config.key, config.response_url));
  }

  /**
   * Where a submission is: "queued" with its 1-based position, "held" with the image it waits
   * for, "leased" (being graded), "delayed" (waiting for a retry), "dead".
   */
  async whereIs(
    config: Pick<GradingJobConfig, "key" | "response_url">,
  ): Promise<{ state: string; position?: number; image?: string } | null> {
    const job = await this.queue.status(orcaKey(config.key, config.response_url));
    if (!job) return null;
    if (job.state === "held") return { state: "held", image: job.gate };
    return job.position === undefined
      ? { state: job.state ?? "unknown" }
      : { state: job.state ?? "queued", position: job.position };
  }

  /** The waiting submissions of a course, in grading order. */
  async waitingFor(course: string, limit = 50): Promise<{ key: string; position: number }[]> {
    const out: { key: string; position: number }[] = [];
    for await (const job of this.queue.list({ filter: { course } })) {
      out.push({ key: (job.config as GradingJobConfig).key, position: job.position ?? 0 });
      if (out.length >= limit) break;
    }
    return out;
  }

  stats(): Promise<QueueStats> {
    return this.queue.stats();
  }
}

async function main(): Promise<void> {
  const redis = new Redis(process.argv[2] ?? "redis://127.0.0.1:6379");
  const grading = new GradingQueue(redis, process.argv[3] ?? "grading");
  console.log("policies", await grading.configure());
  const base = {
    response_url: "http://web.example/api/grading_jobs/result",
    metadata_table: { course: "CS2500" },
  };
  await grading.imageBuilding("cs2500-hw3");
  await grading.submit({ ...base, key: "submission-3", gate: "cs2500-hw3" });
  console.log("submission-3 is", await grading.whereIs({ ...base, key: "submission-3" }));
  const a = await grading.submit({
    ...base,
    key: "submission-1",
    collation: { type: "user", id: "7" },
    priority: 60_000,
  });
  const b = await grading.submit({ ...base, key: "submission-2", collation: { type: "user", id: "8" } });
  console.log("submitted", a, b);
  console.log("submission-1 is", await grading.whereIs({ ...base, key: "submission-1" }));
  await grading.prioritize({ ...base, key: "submission-1" });
  console.log("after prioritize:", await grading.waitingFor("CS2500"));
  console.log("image built, released:", await grading.imageBuilt("cs2500-hw3"));
  console.log("submission-3 is", await grading.whereIs({ ...base, key: "submission-3" }));
  console.log("stats", await grading.stats());
  redis.disconnect();
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}

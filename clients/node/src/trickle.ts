/**
 * What a Worker knows about how its work arrives, for its blocking waits (see worker.ts). Once
 * the queue was found empty and jobs arrive one by one (a blocking command brought fewer than
 * asked: a trickle), the last running jobs' finishes ack and wait for the next job in one
 * command, `ORCA.MACK ... NEXT COUNT <free slots> BLOCK <ms>`, instead of a blocking pop and an
 * ACK. The fetcher, finding the queue empty while quick handlers run, waits a little for them
 * to finish (`lingering`) rather than blocking on its own.
 */

// The most a fetcher waits for a running job to finish before it blocks on its own: about
// twice the handlers' recent time, only while that is below half of this (a job arriving
// meanwhile waits at most about one handler run; slower handlers never delay a blocking pop).
const LINGER_MS = 10;
/**
 * The longest a finish waits for the next job (MACK ... NEXT BLOCK): its `completed` events come
 * with the reply, so never later than this.
 */
export const ACK_WAIT_MS = 100;

export class Trickle {
  /** Jobs arrive one by one (a blocking command brought fewer than asked). */
  on = false;
  private handlerMs = 0; // moving average of a job's time from start() to its handler settling
  private lingerUntil = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly over: () => void) {}

  /** A reply brought `got` of `n` jobs: a full one ends a trickle; a short blocking one is one. */
  arriving(n: number, got: number, wasBlocking: boolean): void {
    if (got >= n) this.on = false;
    else if (wasBlocking && got > 0) this.on = true;
  }

  /** A handler settled for a job the worker got at `started` (performance.now()). */
  took(started: number): void {
    this.handlerMs += (performance.now() - started - this.handlerMs) / 8;
  }

  /**
   * Whether the fetcher is to wait longer for one of `running` quick handlers to finish (it is
   * called again, `over`, when the wait ends).
   */
  lingering(running: number): boolean {
    if (!this.on || running === 0 || this.handlerMs >= LINGER_MS / 2) {
      this.lingerUntil = 0;
      return false;
    }
    const now = performance.now();
    if (this.lingerUntil === 0) this.lingerUntil = now + Math.min(LINGER_MS, 2 * this.handlerMs + 1);
    if (now >= this.lingerUntil) {
      this.lingerUntil = 0;
      return false;
    }
    this.timer ??= setTimeout(this.fire, this.lingerUntil - now);
    return true;
  }

  /** A finish waits for work now (or the worker closes): no more lingering. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.lingerUntil = 0;
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.over();
  };
}

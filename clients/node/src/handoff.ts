/**
 * A worker's hand-off: a handler that resolves to a `Forward` finishes its job and enqueues the
 * next stage's job in one atomic step (`ORCA.ACK ... FORWARD`).
 */
import type { Config } from "./keys";

export class Forward {
  /**
   * Resolve a `Worker`'s handler to it to hand the job on: the worker acks the delivery with
   * `result` (encoded as any handler value) and enqueues `config` into `queue` (a name or a
   * `Queue`; in a Cluster, of the same hash tag) in one step, or neither. If the server refuses
   * the hand-off (a bad config, the next queue full), nothing changed: the delivery stays leased
   * until its lease runs out and comes back, as after any refused ACK.
   */
  constructor(
    readonly queue: string | { name: string },
    readonly config: Config,
    readonly result?: unknown,
  ) {}
}

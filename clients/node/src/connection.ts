import type { Cluster, Redis } from "ioredis";

/**
 * A connection of its own for blocking pops, to the same server as `client`.
 *
 * ioredis does not know that `ORCA.POP ... BLOCK` blocks: a `commandTimeout` (or
 * `socketTimeout`) shorter than BLOCK makes the client give up while the server keeps the
 * connection blocked, and the next job is then leased to a reader that is gone. So this
 * connection has no command or socket timeout, does not pipeline, and never re-sends a
 * command after a reconnect (`autoResendUnfulfilledCommands: false`): a pop lost with its
 * connection must not be issued twice.
 */
export function blockingConnection(client: Redis, name = "orca-blocking"): Redis {
  const conn = client.duplicate({
    connectionName: name,
    enableAutoPipelining: false,
    autoResendUnfulfilledCommands: false,
    commandTimeout: undefined,
    socketTimeout: undefined,
    blockingTimeout: undefined,
    maxRetriesPerRequest: 0,
    lazyConnect: false,
  });
  blocking.add(conn);
  return conn;
}

const blocking = new WeakSet<object>();

/** Whether `client` was made by `blockingConnection()` (the only kind a BLOCK pop may use). */
export function isBlockingConnection(client: object): boolean {
  return blocking.has(client);
}

/** Throws unless a pop with `blockMs` may run on `client`. */
export function checkBlocking(client: object, blockMs: number | undefined): void {
  if (blockMs !== undefined && !isBlockingConnection(client))
    throw new TypeError(
      "a blocking pop needs a connection of its own whose timeouts stay above BLOCK: " +
        "use a Queue on blockingConnection(redis) (or a Worker)",
    );
}

/**
 * A connection for a worker's non-blocking commands (pops, acks, heartbeats); for a Cluster, a
 * Cluster of its own (one connection per node).
 */
export function commandConnection(client: Redis, name?: string): Redis;
export function commandConnection(client: Cluster, name?: string): Cluster;
export function commandConnection(client: Redis | Cluster, name?: string): Redis | Cluster;
export function commandConnection(client: Redis | Cluster, name = "orca-worker"): Redis | Cluster {
  if ("stream" in client || !("nodes" in client))
    return client.duplicate({ connectionName: name, enableAutoPipelining: false, lazyConnect: false });
  return client.duplicate([], {
    enableAutoPipelining: false,
    lazyConnect: false,
    redisOptions: { ...client.options.redisOptions, connectionName: name },
  });
}

/**
 * Sending ORCA.* commands through the user's own ioredis client, at the lowest cost it allows.
 *
 * ioredis is a peer dependency: this package never builds a command with a copy of ioredis of
 * its own (a `Command` of another copy lacks what the user's client calls on it: ioredis 6 calls
 * `command.setReplyContext`, which a 5.x `Command` has not). Every command is made by the
 * `Command` class of the ioredis that made the client (see `commandClass`) and given to the
 * client's `sendCommand`; a client whose class cannot be found (a bundled ioredis) gets the
 * command through its public `call`/`callBuffer`.
 *
 * On a plain connection the socket is corked at the first command and uncorked on
 * `process.nextTick`, so all commands issued from one callback and the promise reactions it sets
 * off (the acks of the handlers that settled, the pop for their slots, a burst of enqueues) leave
 * in one write. This is what ioredis's `enableAutoPipelining` does, without its per-command
 * pipeline and promise layers (about 40% of the client's cost per command, measured), and
 * without needing that option on the user's client.
 *
 * On a Cluster, ioredis cannot tell the key of a module command (it knows the key positions of
 * Redis's own commands only) and would send it to a random node, which answers MOVED. So the
 * command is given its queue's slot (CRC16 of the key, hash tags included: `cluster-key-slot`,
 * the library ioredis itself uses) and goes straight to the node that serves the queue;
 * MOVED and ASK (a queue whose slot is being migrated) are still followed by ioredis.
 */
import type { Socket } from "node:net";
import type { Cluster, Redis } from "ioredis";
import calculateSlot from "cluster-key-slot";

import { mapError } from "./errors";
import type * as P from "./protocol";

export type RedisClient = Redis | Cluster;

/** What this module uses of an ioredis `Command` (5.x and 6.x alike). */
interface CommandLike {
  promise: Promise<unknown>;
}
type CommandClass = new (
  name: string,
  args: P.Arg[],
  options: { replyEncoding: "utf8" | null },
) => CommandLike;
type Sender = { sendCommand(command: CommandLike): unknown };
type Caller = {
  call(name: string, ...args: P.Arg[]): Promise<unknown>;
  callBuffer(name: string, ...args: P.Arg[]): Promise<unknown>;
};

/** Whether `client` is an ioredis Cluster (it routes by slot over several nodes). */
export function isCluster(client: object): client is Cluster {
  return (
    "nodes" in client && typeof (client as { nodes?: unknown }).nodes === "function" && !("stream" in client)
  );
}

const classes = new WeakMap<object, CommandClass | null>();

/**
 * The `Command` class of the ioredis copy that made `client`: the static `Command` of the
 * client's class when it has one (a subclass may declare its own), else the one exported by the
 * loaded ioredis module whose `Redis` or `Cluster` made it (ioredis's classes mix EventEmitter
 * into their prototype, `constructor` included, so an instance does not lead to its class).
 * Null when neither is found (a bundled ioredis): the client's own `call` is used then.
 */
function commandClass(client: RedisClient): CommandClass | null {
  const known = classes.get(client);
  if (known !== undefined) return known;
  let found: CommandClass | null = null;
  const own = (client.constructor as { Command?: CommandClass }).Command;
  if (typeof own === "function") found = own;
  else
    for (const m of Object.values(require.cache)) {
      const ex = m?.exports as { Redis?: unknown; Cluster?: unknown; Command?: unknown } | undefined;
      if (!ex || typeof ex.Command !== "function") continue;
      const made = [ex.Redis, ex.Cluster].some((c) => typeof c === "function" && client instanceof c);
      if (made) {
        found = ex.Command as CommandClass;
        break;
      }
    }
  classes.set(client, found);
  return found;
}

/** The queue key a command names (ORCA.MPOP: after its key count), for its Cluster slot. */
function keyOf(args: P.Arg[]): P.Arg | undefined {
  return String(args[0]).toUpperCase() === "ORCA.MPOP" ? args[2] : args[1];
}

const corked = new WeakSet<object>();

function cork(client: RedisClient): void {
  if (!("stream" in client) || client.status !== "ready") return;
  const stream = client.stream as Socket | undefined;
  if (!stream || corked.has(stream) || stream.writableCorked) return;
  corked.add(stream);
  stream.cork();
  // process.nextTick runs once the current callback and every microtask queued from it are
  // done: the commands issued by that whole cascade (handlers settling, their acks, the pop
  // for the freed slots) are in by then, and nothing waits for another event-loop phase.
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork();
  });
}

/**
 * Sends `args` on `client` as one command built by the client's own ioredis; resolves to the
 * raw reply (bulk strings as Buffers with `buffers`, else as strings).
 */
export function sendRaw(client: RedisClient, args: P.Arg[], buffers = false): Promise<unknown> {
  const [name, ...rest] = args as [string, ...P.Arg[]];
  const Command = commandClass(client);
  const cluster = isCluster(client);
  if (!cluster) cork(client);
  if (Command === null) {
    const c = client as unknown as Caller;
    return buffers ? c.callBuffer(name, ...rest) : c.call(name, ...rest);
  }
  const command = new Command(name, rest, { replyEncoding: buffers ? null : "utf8" });
  if (cluster) {
    const key = keyOf(args);
    if (key !== undefined)
      (command as { slot?: number }).slot = calculateSlot(typeof key === "number" ? String(key) : key);
  }
  (client as unknown as Sender).sendCommand(command);
  return command.promise;
}

function mapped(e: unknown): never {
  throw mapError(e);
}

/** Clients whose server refused `FORMAT VALUES` (a module older than this client). */
const noValues = new WeakSet<object>();

function refusedFormat(e: unknown): boolean {
  return e instanceof Error && /unknown option 'FORMAT'/i.test(e.message);
}

/**
 * Sends one command on `client`, mapping error replies to OrcaError classes. A command that asks
 * for `FORMAT VALUES` goes as its `legacy` form to a server that refused the option (an error
 * that changed nothing), from then on on that client.
 */
export function send<T>(client: RedisClient, cmd: P.Command<T>): Promise<T> {
  const legacy = cmd.legacy;
  if (legacy !== undefined && noValues.has(client)) return send(client, legacy);
  const sent = sendRaw(client, cmd.args, cmd.buffers === true);
  if (legacy === undefined) return sent.then(cmd.parse, mapped);
  return sent.then(cmd.parse, (e: unknown) => {
    if (!refusedFormat(e)) return mapped(e);
    noValues.add(client);
    return send(client, legacy);
  });
}

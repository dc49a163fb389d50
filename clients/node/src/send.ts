/**
 * Sending ORCA.* commands with ioredis at the lowest cost it allows.
 *
 * Every command is an ioredis `Command` given to `sendCommand`; on a plain connection the
 * socket is corked at the first command and uncorked on `process.nextTick`, so all commands
 * issued from one callback and the promise reactions it sets off (the acks of the handlers
 * that settled, the pop for their slots, a burst of enqueues) leave in one write. This is what ioredis's
 * `enableAutoPipelining` does, without its per-command pipeline and promise layers (about
 * 40% of the client's cost per command, measured), and without needing that option on the
 * user's client.
 */
import type { Socket } from "node:net";
import { Command, type Cluster, type Redis } from "ioredis";

import { mapError } from "./errors";
import type * as P from "./protocol";

export type RedisClient = Redis | Cluster;

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
  const [name, ...args] = cmd.args as [string, ...P.Arg[]];
  const command = new Command(name, args, { replyEncoding: cmd.buffers ? null : "utf8" });
  cork(client);
  client.sendCommand(command);
  const sent = command.promise as Promise<unknown>;
  if (legacy === undefined) return sent.then(cmd.parse, mapped);
  return sent.then(cmd.parse, (e: unknown) => {
    if (!refusedFormat(e)) return mapped(e);
    noValues.add(client);
    return send(client, legacy);
  });
}

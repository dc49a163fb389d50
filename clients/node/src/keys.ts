import { createHash } from "node:crypto";

/** A job config: an object (sent as JSON) or the JSON text itself. */
export type Config = Record<string, unknown> | string | Buffer;

/** The server's orca key: base64(sha256(key + responseUrl)), standard alphabet with padding. */
export function orcaKey(key: string, responseUrl = ""): string {
  return createHash("sha256")
    .update(key + responseUrl, "utf8")
    .digest("base64");
}

/** The orca key of a config (its `key` and `response_url` fields). */
export function configOrcaKey(config: Config): string {
  const obj: unknown =
    typeof config === "string" || Buffer.isBuffer(config) ? JSON.parse(config.toString()) : config;
  if (typeof obj !== "object" || obj === null) throw new TypeError("config must be a JSON object");
  const { key, response_url: url } = obj as { key?: unknown; response_url?: unknown };
  if (typeof key !== "string") throw new TypeError("config has no string field 'key'");
  if (url !== undefined && url !== null && typeof url !== "string") {
    throw new TypeError("response_url must be a string");
  }
  return orcaKey(key, url ?? "");
}

/** A config as sent: objects as compact JSON, strings/Buffers as given (the server validates). */
export function encodeConfig(config: Config): string | Buffer {
  return typeof config === "string" || Buffer.isBuffer(config) ? config : JSON.stringify(config);
}

/**
 * An ACK result as sent: `undefined` keeps none, Buffers/Uint8Arrays go as they are, anything
 * else (strings and `null` included) as JSON.
 */
export function encodeResult(value: unknown): Buffer | string | undefined {
  if (value === undefined) return undefined;
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`handler result is not JSON-serializable: ${typeof value}`);
  return json;
}

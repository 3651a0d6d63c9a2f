import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/** A Lua script that Redis runs atomically, sent by its SHA-1 once Redis has it cached. */
export interface RedisScript {
  source: string;
  sha: string;
}

/** Prepares a script: its source and the SHA-1 that `EVALSHA` names it by. */
export function defineRedisScript(source: string): RedisScript {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/**
 * Runs `script` with `EVALSHA`; when Redis does not have it cached (first use, or after a
 * restart or `SCRIPT FLUSH`) it is sent once with `EVAL`, which caches it for the next calls.
 */
export async function runRedisScript(
  redis: Redis,
  script: RedisScript,
  keys: string[],
  args: (string | number)[],
): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith("NOSCRIPT"))) throw error;
    return await redis.eval(script.source, keys.length, ...keys, ...args);
  }
}

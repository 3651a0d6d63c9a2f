/**
 * What rate limits do while Redis is unreachable:
 * - `fail-open` (default): requests are admitted without per-key limits; balances still hold,
 *   since they live in the store.
 * - `fail-closed`: requests of keys with an rpm or tpm limit are refused with 503 until Redis is
 *   back; keys without limits are not affected.
 */
export type RedisFailurePolicy = "fail-open" | "fail-closed";

export const DEFAULT_REDIS_FAILURE_POLICY: RedisFailurePolicy = "fail-open";

/** Reads a policy as written in the config or environment; `undefined` or empty: the default. */
export function parseRedisFailurePolicy(value: string | undefined, source: string): RedisFailurePolicy {
  const trimmed = value?.trim() ?? "";
  if (trimmed === "") return DEFAULT_REDIS_FAILURE_POLICY;
  if (trimmed === "fail-open" || trimmed === "fail-closed") return trimmed;
  throw new Error(
    `${source} must be "fail-open" (admit requests without rate limits while Redis is down) or "fail-closed" (refuse requests of rate-limited keys with 503); got "${trimmed}".`,
  );
}

import { parseRedisFailurePolicy, type RedisFailurePolicy } from "../limits/redis-failure-policy.ts";

/** The key prefix and channel prefix of a deployment that sets none. */
export const DEFAULT_REDIS_PREFIX = "tollgate:";

/** How replicas share Redis. */
export interface ClusterSettings {
  /**
   * Prepended to every Redis key and channel (`<prefix>rate:...`, `<prefix>invalidate`):
   * replicas of one deployment share it; deployments sharing a Redis need different ones.
   * `TOLLGATE_REDIS_PREFIX`, default `tollgate:`.
   */
  prefix: string;
  /** `TOLLGATE_REDIS_FAILURE_POLICY`: `fail-open` (default) or `fail-closed`. */
  failurePolicy: RedisFailurePolicy;
}

/** Reads the settings from the environment; throws a message naming the variable on a bad value. */
export function readClusterSettings(env: NodeJS.ProcessEnv): ClusterSettings {
  return {
    prefix: readRedisPrefix(env),
    failurePolicy: parseRedisFailurePolicy(
      env.TOLLGATE_REDIS_FAILURE_POLICY,
      "TOLLGATE_REDIS_FAILURE_POLICY",
    ),
  };
}

/** `TOLLGATE_REDIS_PREFIX`, trimmed, or {@link DEFAULT_REDIS_PREFIX}. */
export function readRedisPrefix(env: NodeJS.ProcessEnv): string {
  const prefix = env.TOLLGATE_REDIS_PREFIX?.trim();
  return prefix === undefined || prefix === "" ? DEFAULT_REDIS_PREFIX : prefix;
}

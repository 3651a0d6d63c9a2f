import type { Redis } from "ioredis";
import type { ClusterLogger } from "../cluster/cluster-logger.ts";
import { closeRedisClient, connectRedisClient, createRedisClient } from "../cluster/create-redis-client.ts";
import { RedisOutageLog } from "../cluster/redis-outage-log.ts";
import { type RedisScript, runRedisScript } from "../cluster/run-redis-script.ts";
import { AppError } from "../errors/app-error.ts";
import type { BucketRequest, BucketState, RateLimiter, TakeResult } from "./rate-limiter.ts";
import { DEFAULT_REDIS_FAILURE_POLICY, type RedisFailurePolicy } from "./redis-failure-policy.ts";
import { ADJUST_SCRIPT, PEEK_SCRIPT, TAKE_SCRIPT } from "./token-bucket-scripts.ts";

/** Options of {@link RedisRateLimiter.connect}. */
export interface RedisRateLimiterOptions {
  /** `redis://` or `rediss://` URL. */
  url: string;
  /** Prepended to every key: a bucket lives at `<prefix>rate:<bucket>`. E.g. `tollgate:`. */
  prefix: string;
  /** What happens while Redis is unreachable; default `fail-open`. */
  failurePolicy?: RedisFailurePolicy;
  /** Where an outage is logged: one line when it starts, one when it ends. */
  logger: ClusterLogger;
  /** Milliseconds one command may take before the failure policy applies; default 1000. */
  commandTimeoutMs?: number;
  /** Tests only: milliseconds added to Redis's clock, read on every call. Default: none. */
  clockOffsetMs?: () => number;
}

/** How long a client is asked to wait when fail-closed refuses a request. */
const RETRY_AFTER_SECONDS = 5;

/** How long the limiter leaves Redis alone after a command failed. */
export const REDIS_REST_MS = 2_000;

/**
 * Token buckets in Redis, shared by every replica that uses the same Redis and prefix, with the
 * semantics of {@link MemoryRateLimiter} (see `token-bucket-scripts.ts`): each operation is one
 * Lua script, atomic in Redis, on Redis's clock.
 *
 * While Redis is unreachable or slow (a command fails at once, or after `commandTimeoutMs`),
 * nothing hangs and nothing answers 500: under `fail-open` a take is allowed and a peek reports
 * a full bucket; under `fail-closed` a take throws 503 and a peek reports an empty one.
 * Adjustments are dropped either way. The outage is logged once. After a command fails, Redis is
 * left alone for {@link REDIS_REST_MS}: the requests in that time get the policy at once instead
 * of each waiting out the command timeout of a Redis that stopped answering; then the next
 * command tries again.
 */
export class RedisRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #policy: RedisFailurePolicy;
  readonly #outageLog: RedisOutageLog;
  readonly #clockOffsetMs: () => number;
  /** `performance.now()` until which Redis is not asked (it just failed). */
  #restUntil = 0;

  private constructor(redis: Redis, outageLog: RedisOutageLog, options: RedisRateLimiterOptions) {
    this.#redis = redis;
    this.#outageLog = outageLog;
    this.#prefix = options.prefix;
    this.#policy = options.failurePolicy ?? DEFAULT_REDIS_FAILURE_POLICY;
    this.#clockOffsetMs = options.clockOffsetMs ?? (() => 0);
  }

  /**
   * Connects to Redis (waiting at most a couple of seconds) and returns the limiter. An
   * unreachable Redis is logged, not thrown: the limiter applies its failure policy and keeps
   * reconnecting.
   */
  static async connect(options: RedisRateLimiterOptions): Promise<RedisRateLimiter> {
    const policy = options.failurePolicy ?? DEFAULT_REDIS_FAILURE_POLICY;
    const outageLog = new RedisOutageLog({
      logger: options.logger,
      role: "rate limits",
      consequence:
        policy === "fail-open"
          ? "requests are admitted without per-key rate limits (TOLLGATE_REDIS_FAILURE_POLICY=fail-open)"
          : "requests of keys with an rpm or tpm limit are refused with 503 (TOLLGATE_REDIS_FAILURE_POLICY=fail-closed)",
    });
    const redis = createRedisClient({
      url: options.url,
      outageLog,
      ...(options.commandTimeoutMs === undefined ? {} : { commandTimeoutMs: options.commandTimeoutMs }),
    });
    await connectRedisClient(redis);
    return new RedisRateLimiter(redis, outageLog, options);
  }

  async take(request: BucketRequest & { amount: number }): Promise<TakeResult> {
    const reply = await this.#run(TAKE_SCRIPT, request, [request.amount]);
    if (reply === undefined) {
      if (this.#policy === "fail-closed") throw limitsUnavailable();
      return { allowed: true, retryAfterMs: 0, limit: request.limit, remaining: request.limit, resetMs: 0 };
    }
    const retryAfterMs = readInteger(reply, 3);
    return {
      allowed: readInteger(reply, 0) === 1,
      limit: request.limit,
      remaining: readInteger(reply, 1),
      resetMs: readInteger(reply, 2),
      retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
    };
  }

  async adjust(request: BucketRequest & { amount: number }): Promise<void> {
    await this.#run(ADJUST_SCRIPT, request, [request.amount]);
  }

  async peek(request: BucketRequest): Promise<BucketState> {
    const reply = await this.#run(PEEK_SCRIPT, request, []);
    if (reply === undefined) {
      return this.#policy === "fail-open"
        ? { limit: request.limit, remaining: request.limit, resetMs: 0 }
        : { limit: request.limit, remaining: 0, resetMs: 60_000 };
    }
    return { limit: request.limit, remaining: readInteger(reply, 0), resetMs: readInteger(reply, 1) };
  }

  async close(): Promise<void> {
    await closeRedisClient(this.#redis);
  }

  /** Runs a script on the request's bucket; `undefined` when Redis failed (already logged). */
  async #run(script: RedisScript, request: BucketRequest, extra: number[]): Promise<unknown[] | undefined> {
    if (this.#restUntil > 0 && performance.now() < this.#restUntil) return undefined;
    try {
      const reply = await runRedisScript(
        this.#redis,
        script,
        [`${this.#prefix}rate:${request.bucket}`],
        [request.limit, this.#clockOffsetMs(), ...extra],
      );
      this.#outageLog.recovered();
      this.#restUntil = 0;
      return Array.isArray(reply) ? (reply as unknown[]) : [reply];
    } catch (error) {
      this.#outageLog.failed(error);
      this.#restUntil = performance.now() + REDIS_REST_MS;
      return undefined;
    }
  }
}

/** One integer of a script's reply (a script bug, not an outage, when it is not one). */
function readInteger(reply: unknown[], index: number): number {
  const value = reply[index];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new Error(`unexpected reply from a rate-limit script: ${JSON.stringify(reply)}`);
  }
  return value;
}

function limitsUnavailable(): AppError {
  // Redis is the limits' store: nothing upstream failed, and the client is told so.
  return new AppError(
    "store_unavailable",
    "Rate limits cannot be checked right now: Tollgate cannot reach its Redis, and it refuses requests of rate-limited keys until Redis is back. Retry shortly.",
    { retryAfterSeconds: RETRY_AFTER_SECONDS },
  );
}

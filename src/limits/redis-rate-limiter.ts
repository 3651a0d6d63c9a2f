import type { Redis } from "ioredis";
import type { ClusterLogger } from "../cluster/cluster-logger.ts";
import {
  closeRedisClient,
  connectRedisClient,
  createRedisClient,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
} from "../cluster/create-redis-client.ts";
import { RedisOutageLog } from "../cluster/redis-outage-log.ts";
import { type RedisScript, runRedisScript } from "../cluster/run-redis-script.ts";
import type { AppError } from "../errors/app-error.ts";
import type { BucketRequest, BucketState, RateLimiter, TakeResult } from "./rate-limiter.ts";
import { RateLimitsUnavailableError } from "./rate-limits-unavailable-error.ts";
import { DEFAULT_REDIS_FAILURE_POLICY, type RedisFailurePolicy } from "./redis-failure-policy.ts";
import { ADJUST_SCRIPT, PEEK_SCRIPT, TAKE_SCRIPT, TAKE_TOO_LATE } from "./token-bucket-scripts.ts";

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
 * How long before the command timeout a take's deadline falls: room for its answer's way back
 * (an answer still on its way when the limiter gives up is lost) and for the clocks drifting
 * apart since the last reading. A take that Redis runs in it is refused although the limiter
 * would still have waited a moment: it counts as timed out, a little early.
 */
export const TAKE_DEADLINE_MARGIN_MS = 50;

/** How long a reading of Redis's clock is used before a newer one replaces it, however loose. */
const CLOCK_READING_LIFETIME_MS = 10_000;

/**
 * Token buckets in Redis, shared by every replica that uses the same Redis and prefix, with the
 * semantics of {@link MemoryRateLimiter} (see `token-bucket-scripts.ts`): each operation is one
 * Lua script, atomic in Redis, on Redis's clock.
 *
 * While Redis is unreachable or slow (a command fails at once, or after `commandTimeoutMs`),
 * nothing hangs and nothing answers 500: under `fail-open` a take is allowed and a peek reports
 * a full bucket; under `fail-closed` a take throws 503 and a peek reports an empty one, full
 * again when the 503's retry-after has passed.
 * Adjustments are dropped either way. The outage is logged once. After a command fails, Redis is
 * left alone for {@link REDIS_REST_MS}: the requests in that time get the policy at once instead
 * of each waiting out the command timeout of a Redis that stopped answering; then the next
 * command tries again, alone: until it answers, the others get the policy at once too.
 *
 * A take that timed out is still in Redis's socket, and a stalled Redis runs it when it resumes.
 * It must take nothing then: the request it was for was refused (fail-closed) or ran without
 * limits (fail-open) before. So each take carries a deadline on Redis's clock, at the latest
 * {@link TAKE_DEADLINE_MARGIN_MS} before the limiter gives up on it, and the script takes nothing
 * after it; Redis's clock is learned from the answers (see {@link RedisClockReading}). A take
 * that answers it ran too late counts as timed out (it is sent once more when the answer came
 * before the timeout: then the deadline may have been early).
 */
export class RedisRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #policy: RedisFailurePolicy;
  readonly #outageLog: RedisOutageLog;
  readonly #clockOffsetMs: () => number;
  readonly #commandTimeoutMs: number;
  readonly #redisClock = new RedisClockReading();
  /** The `TIME` command that gives the first reading of Redis's clock, while it runs. */
  #firstClockReading: Promise<void> | undefined;
  /**
   * `performance.now()` until which Redis is not asked (it just failed); 0 once a command
   * succeeded again. Past it, one command at a time asks (see {@link #probing}).
   */
  #restUntil = 0;
  /** A command is asking a Redis that failed, after its rest: the others get the policy meanwhile. */
  #probing = false;

  private constructor(redis: Redis, outageLog: RedisOutageLog, options: RedisRateLimiterOptions) {
    this.#redis = redis;
    this.#outageLog = outageLog;
    this.#prefix = options.prefix;
    this.#policy = options.failurePolicy ?? DEFAULT_REDIS_FAILURE_POLICY;
    this.#clockOffsetMs = options.clockOffsetMs ?? (() => 0);
    this.#commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS;
    // Connected again (a dropped connection comes back in a tenth of a second): the rest that a
    // command failing meanwhile began is over, or the policy would apply for its whole length to
    // a Redis that answers (no limits under fail-open, every limited request refused otherwise).
    redis.on("ready", () => {
      this.#restUntil = 0;
    });
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
    const reply = await this.#run(TAKE_SCRIPT, request, [request.amount], { deadline: true });
    if (reply === undefined) {
      if (this.#policy === "fail-closed") throw limitsUnavailable();
      return {
        allowed: true,
        untaken: true,
        retryAfterMs: 0,
        limit: request.limit,
        remaining: request.limit,
        resetMs: 0,
      };
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

  async adjust(request: BucketRequest & { amount: number }): Promise<BucketState | undefined> {
    const reply = await this.#run(ADJUST_SCRIPT, request, [request.amount], { deadline: false });
    if (reply === undefined) return undefined;
    return { remaining: readInteger(reply, 0), resetMs: readInteger(reply, 1), limit: readInteger(reply, 2) };
  }

  async peek(request: BucketRequest): Promise<BucketState> {
    const reply = await this.#run(PEEK_SCRIPT, request, [], { deadline: false });
    // The bucket is not known; the headers (SPEC §11: the trio whenever the key has the limit)
    // tell what the policy does meanwhile. Fail-open: nothing limits the key, the whole limit is
    // there. Fail-closed: nothing is admitted until the 503's retry-after, and no later (it said
    // "due in a minute" beside "retry after 5 s").
    if (reply === undefined) {
      return this.#policy === "fail-open"
        ? { limit: request.limit, remaining: request.limit, resetMs: 0 }
        : { limit: request.limit, remaining: 0, resetMs: RETRY_AFTER_SECONDS * 1000 };
    }
    return { limit: request.limit, remaining: readInteger(reply, 0), resetMs: readInteger(reply, 1) };
  }

  async close(): Promise<void> {
    await closeRedisClient(this.#redis);
  }

  /**
   * Runs a script on the request's bucket, with a deadline when asked (a take); `undefined` when
   * Redis failed (already logged), or ran the script after its deadline.
   */
  async #run(
    script: RedisScript,
    request: BucketRequest,
    extra: number[],
    options: { deadline: boolean },
  ): Promise<unknown[] | undefined> {
    // After a failure only one command asks until one succeeds: with Redis still stalled, the
    // requests that come meanwhile do not each wait out the command timeout.
    const probe = this.#restUntil > 0;
    if (probe && (this.#probing || performance.now() < this.#restUntil)) return undefined;
    if (probe) this.#probing = true;
    try {
      if (options.deadline && !this.#redisClock.known) await this.#readRedisClockOnce();
      let answer = await this.#send(script, request, extra, options);
      // Too late, yet answered before the limiter gave up: Redis ran it just before the
      // timeout, or the deadline was early, set from a reading of Redis's clock that this answer
      // replaced (a slow answer's, or one from before Redis's clock was set forward). It took
      // nothing: once more.
      if (answer.tooLate && answer.withinTimeout) answer = await this.#send(script, request, extra, options);
      if (answer.tooLate)
        throw new Error("Command timed out (Redis ran it after its deadline: it took nothing)");
      this.#outageLog.recovered();
      this.#restUntil = 0;
      return answer.values;
    } catch (error) {
      this.#outageLog.failed(error);
      this.#restUntil = performance.now() + REDIS_REST_MS;
      return undefined;
    } finally {
      if (probe) this.#probing = false;
    }
  }

  /** Sends a script once, and learns Redis's clock from its answer. */
  async #send(
    script: RedisScript,
    request: BucketRequest,
    extra: number[],
    options: { deadline: boolean },
  ): Promise<{ values: unknown[]; tooLate: boolean; withinTimeout: boolean }> {
    const sentAt = readLocalClock();
    // The limiter gives up on the command at `sentAt + commandTimeoutMs` at the earliest.
    const deadline = options.deadline
      ? this.#redisClock.earliest(sentAt + this.#commandTimeoutMs - TAKE_DEADLINE_MARGIN_MS)
      : undefined;
    const reply = await runRedisScript(
      this.#redis,
      script,
      [`${this.#prefix}rate:${request.bucket}`],
      [request.limit, this.#clockOffsetMs(), ...extra, ...(deadline === undefined ? [] : [deadline])],
    );
    const values = Array.isArray(reply) ? (reply as unknown[]) : [reply];
    const answeredAt = readLocalClock();
    // Every script's reply ends with Redis's clock.
    this.#redisClock.learn({ redisMs: readInteger(values, values.length - 1), sentAt, answeredAt });
    return {
      values,
      tooLate: options.deadline && values[0] === TAKE_TOO_LATE,
      withinTimeout: answeredAt - sentAt < this.#commandTimeoutMs,
    };
  }

  /**
   * Before the first take, reads Redis's clock with `TIME` (once, for every take waiting for
   * it): a deadline needs a reading of it. Later, every script's answer is a reading.
   */
  async #readRedisClockOnce(): Promise<void> {
    this.#firstClockReading ??= (async () => {
      const sentAt = readLocalClock();
      const [seconds, microseconds] = await this.#redis.time();
      const redisMs = Number(seconds) * 1000 + Math.floor(Number(microseconds) / 1000);
      this.#redisClock.learn({ redisMs, sentAt, answeredAt: readLocalClock() });
    })().finally(() => {
      this.#firstClockReading = undefined;
    });
    await this.#firstClockReading;
  }
}

/** This process's clock in milliseconds: steady (never set back), on the epoch's scale. */
function readLocalClock(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Where Redis's clock stands against ours, from one answer: Redis read its clock (`redisMs`,
 * truncated to the millisecond) after we sent the command and before we had the answer, so
 * Redis's clock minus ours was at least `redisMs - answeredAt` and at most
 * `redisMs + 1 - sentAt`. The reading of the quickest answer is kept (the narrowest range; its
 * lower end is short of the truth by about the answer's way back, which is what a deadline needs
 * to leave room for). A newer reading replaces it when it is as quick, when the ranges do not
 * overlap (Redis's clock was set, or Redis moved to another host), and when the kept one is
 * older than {@link CLOCK_READING_LIFETIME_MS}, so that slow drift between the clocks never adds
 * up. A slow reading puts deadlines early (a take refused too soon, then sent again), never late.
 */
class RedisClockReading {
  #aheadAtLeast = 0;
  #aheadAtMost = 0;
  /** Our clock when the kept reading was taken; `undefined` before the first. */
  #learnedAt: number | undefined;

  get known(): boolean {
    return this.#learnedAt !== undefined;
  }

  learn(answer: { redisMs: number; sentAt: number; answeredAt: number }): void {
    const aheadAtLeast = answer.redisMs - answer.answeredAt;
    const aheadAtMost = answer.redisMs + 1 - answer.sentAt;
    if (
      this.#learnedAt === undefined ||
      // The kept reading was wrong.
      aheadAtLeast > this.#aheadAtMost ||
      aheadAtMost < this.#aheadAtLeast ||
      // This answer was as quick.
      aheadAtMost - aheadAtLeast <= this.#aheadAtMost - this.#aheadAtLeast ||
      answer.answeredAt - this.#learnedAt > CLOCK_READING_LIFETIME_MS
    ) {
      this.#aheadAtLeast = aheadAtLeast;
      this.#aheadAtMost = aheadAtMost;
      this.#learnedAt = answer.answeredAt;
    }
  }

  /**
   * Redis's clock at our `moment`, at the earliest, in whole milliseconds; `undefined` before
   * the first reading. A deadline set from it has passed on Redis's clock before `moment` has on
   * ours.
   */
  earliest(moment: number): number | undefined {
    return this.#learnedAt === undefined ? undefined : Math.floor(moment + this.#aheadAtLeast);
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
  return new RateLimitsUnavailableError(
    "store_unavailable",
    "Rate limits cannot be checked right now: Tollgate cannot reach its Redis, and it refuses requests of rate-limited keys until Redis is back. Retry shortly.",
    { retryAfterSeconds: RETRY_AFTER_SECONDS },
  );
}

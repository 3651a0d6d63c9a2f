import type { ClusterLogger } from "./cluster-logger.ts";

/**
 * Logs a Redis outage once, not once per request or reconnection attempt: the first failure
 * writes one error line that says what the outage means for the service, the first success
 * after it writes one line that it is over.
 */
export class RedisOutageLog {
  readonly #logger: ClusterLogger;
  readonly #role: string;
  readonly #consequence: string;
  #down = false;

  /**
   * @param options.role What the connection is for, e.g. `rate limits`.
   * @param options.consequence What the service does while Redis is unreachable.
   */
  constructor(options: { logger: ClusterLogger; role: string; consequence: string }) {
    this.#logger = options.logger;
    this.#role = options.role;
    this.#consequence = options.consequence;
  }

  /** True between a failure and the next success. */
  get down(): boolean {
    return this.#down;
  }

  failed(error: unknown): void {
    if (this.#down) return;
    this.#down = true;
    this.#logger.error(
      { err: error, redisRole: this.#role },
      `Redis is unreachable (${this.#role}): ${describeError(error)}. Until it is back, ${this.#consequence}. Check that Redis runs and that TOLLGATE_REDIS_URL / redis: points at it.`,
    );
  }

  recovered(): void {
    if (!this.#down) return;
    this.#down = false;
    this.#logger.info({ redisRole: this.#role }, `Redis is reachable again (${this.#role}).`);
  }
}

/**
 * The error's message without its closing period (the sentence goes on after it), in the
 * operator's words where ioredis speaks of its own internals: a command sent while the connection
 * is down fails with "Stream isn't writeable and enableOfflineQueue options is false".
 */
function describeError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith("Stream isn't writeable")) return "the connection to it is down";
  return message.replace(/\.+$/, "");
}

import type { SetHeader } from "../chat/chat-admission.ts";
import type { RequestKey } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
import { formatReset } from "./format-reset.ts";
import type { BucketState, RateLimiter, TakeResult } from "./rate-limiter.ts";

type Dimension = "requests" | "tokens";
const DIMENSIONS: readonly Dimension[] = ["requests", "tokens"];
const LIMIT_HEADERS = {
  requests: "x-ratelimit-limit-requests",
  tokens: "x-ratelimit-limit-tokens",
} as const satisfies Record<Dimension, string>;

/** The headers of each dimension, made once: a name built per response is a string per header. */
const HEADERS = {
  requests: {
    limit: "x-ratelimit-limit-requests",
    remaining: "x-ratelimit-remaining-requests",
    reset: "x-ratelimit-reset-requests",
  },
  tokens: {
    limit: "x-ratelimit-limit-tokens",
    remaining: "x-ratelimit-remaining-tokens",
    reset: "x-ratelimit-reset-tokens",
  },
} as const satisfies Record<Dimension, { limit: string; remaining: string; reset: string }>;

/** Bucket names by key public id and dimension: the name is a Map key, flattened on each lookup if built anew. */
const bucketNames = new Map<string, { requests: string; tokens: string }>();

function bucketName(publicId: string, dimension: Dimension): string {
  let names = bucketNames.get(publicId);
  if (names === undefined) {
    if (bucketNames.size >= 10_000) bucketNames.clear();
    names = { requests: `requests:${publicId}`, tokens: `tokens:${publicId}` };
    bucketNames.set(publicId, names);
  }
  return names[dimension];
}

function bucketOf(key: RequestKey, dimension: Dimension) {
  const limit = dimension === "requests" ? key.rpm : key.tpm;
  return limit === undefined ? undefined : { bucket: bucketName(key.publicId, dimension), limit };
}

function setLimitHeaders(setHeader: SetHeader, dimension: Dimension, state: BucketState): void {
  const names = HEADERS[dimension];
  setHeader(names.limit, String(state.limit));
  setHeader(names.remaining, String(state.remaining));
  setHeader(names.reset, formatReset(state.resetMs));
}

function refuse(dimension: Dimension, result: TakeResult, amount: number): AppError {
  if (!Number.isFinite(result.retryAfterMs)) {
    return new AppError(
      "rate_limit_exceeded",
      `Request too large: it may use ${amount} tokens (its prompt plus max_tokens, or, when max_tokens is not set, plus the most the model may generate), and this key's limit is ${result.limit} tokens per minute. Set a lower max_tokens or shorten the messages.`,
      // Waiting cannot help (the bucket never holds more than the limit): OpenAI's SDKs are told
      // not to retry, which they obey before the retry-after that every 429 carries (SPEC §4).
      { retryAfterSeconds: 60, retryable: false },
    );
  }
  const unit = dimension === "requests" ? "request" : "token";
  const what = result.limit === 1 ? unit : `${unit}s`;
  return new AppError(
    "rate_limit_exceeded",
    `Rate limit reached: this key allows ${result.limit} ${what} per minute. Retry in ${formatReset(result.retryAfterMs)}.`,
    { retryAfterSeconds: Math.ceil(result.retryAfterMs / 1000) },
  );
}

/**
 * A key's requests-per-minute and tokens-per-minute buckets, with the response headers that
 * report them (`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, only for the limits
 * the key has) and the 429 errors that refuse a request.
 */
export class KeyLimits {
  readonly #limiter: RateLimiter;

  constructor(limiter: RateLimiter) {
    this.#limiter = limiter;
  }

  /**
   * Reports the key's buckets without spending anything (every response of a limited key), both
   * at once; with `isReported`, only those whose headers are not set yet (a request that spent
   * a bucket has reported it). Returns a promise only when there is something to report: most
   * chat requests spent both buckets, and their way out then costs no promise.
   */
  report(
    key: RequestKey,
    setHeader: SetHeader,
    isReported?: (header: string) => boolean,
  ): Promise<void> | undefined {
    const requests = bucketOf(key, "requests") !== undefined && isReported?.(LIMIT_HEADERS.requests) !== true;
    const tokens = bucketOf(key, "tokens") !== undefined && isReported?.(LIMIT_HEADERS.tokens) !== true;
    if (!requests && !tokens) return undefined;
    const unreported = DIMENSIONS.filter((dimension) => (dimension === "requests" ? requests : tokens));
    return Promise.all(
      unreported.map(async (dimension) => {
        const bucket = bucketOf(key, dimension);
        if (bucket !== undefined) setLimitHeaders(setHeader, dimension, await this.#limiter.peek(bucket));
      }),
    ).then(() => undefined);
  }

  /** Spends one request, or throws 429 `rate_limit_exceeded`; answers what was taken (see {@link takeTokens}). */
  takeRequest(key: RequestKey, setHeader: SetHeader): Promise<number> {
    return this.#take(key, "requests", 1, setHeader);
  }

  /**
   * Spends the request's estimated tokens, or throws 429 `rate_limit_exceeded`. Answers what was
   * taken: none for a key without a tpm limit, or while Redis cannot be reached under fail-open
   * (regression: the settle then gave the unused part of tokens never taken back to the shared
   * bucket once Redis was back, up to a whole bucket over the limit after each outage).
   */
  takeTokens(key: RequestKey, amount: number, setHeader: SetHeader): Promise<number> {
    return this.#take(key, "tokens", amount, setHeader);
  }

  /**
   * Gives back the tokens taken for a request that was refused after all (it spends nothing), and
   * reports the bucket as it is then: the headers set when they were taken would say they were spent.
   */
  async returnTokens(key: RequestKey, amount: number, setHeader: SetHeader): Promise<void> {
    const bucket = bucketOf(key, "tokens");
    if (bucket === undefined || amount === 0) return;
    await this.#limiter.adjust({ ...bucket, amount });
    setLimitHeaders(setHeader, "tokens", await this.#limiter.peek(bucket));
  }

  /**
   * Corrects the token bucket once the real count is known: gives back `estimate - actual`
   * (`estimate`: what {@link takeTokens} took; nothing to correct when it took none), and
   * sets the tokens headers again to what the bucket holds after it (they are sent only if the
   * response has not begun: a non-streamed answer's, settled before it is sent).
   */
  async correctTokens(
    key: RequestKey,
    estimate: number,
    actual: number,
    setHeader: SetHeader,
  ): Promise<void> {
    const bucket = bucketOf(key, "tokens");
    if (bucket === undefined || estimate === 0 || estimate === actual) return;
    const state = await this.#limiter.adjust({ ...bucket, amount: estimate - actual });
    if (state !== undefined) setLimitHeaders(setHeader, "tokens", state);
  }

  /** Takes `amount`, or throws 429; answers what was taken (see {@link takeTokens}). */
  async #take(key: RequestKey, dimension: Dimension, amount: number, setHeader: SetHeader): Promise<number> {
    const bucket = bucketOf(key, dimension);
    if (bucket === undefined) return 0;
    const result = await this.#limiter.take({ bucket: bucket.bucket, limit: bucket.limit, amount });
    setLimitHeaders(setHeader, dimension, result);
    if (!result.allowed) throw refuse(dimension, result, amount);
    return result.untaken === true ? 0 : amount;
  }
}

/**
 * Per-key rate limits as token buckets (SPEC §7, §11): a bucket holds at most `limit`, starts
 * full and refills continuously at `limit / 60` per second. The in-memory limiter serves one
 * process; a Redis limiter with the same semantics serves several replicas. Both pass the same
 * conformance suite.
 */

/** The state of one bucket after a take or a peek. */
export interface BucketState {
  /** The bucket's capacity: the per-minute limit. */
  limit: number;
  /** Whole units left now (never negative). */
  remaining: number;
  /** Milliseconds until the bucket is full again. */
  resetMs: number;
}

/** The outcome of {@link RateLimiter.take}. */
export interface TakeResult extends BucketState {
  allowed: boolean;
  /**
   * Allowed without taking anything: the limiter could not be reached and its policy admits
   * (Redis's fail-open). Nothing is to be given back for it, nor corrected.
   */
  untaken?: true;
  /** When refused: milliseconds until `amount` fits. `Infinity` when it never can (above the limit). */
  retryAfterMs: number;
}

/** What a bucket is for: `requests` per minute or `tokens` per minute of one key. */
export interface BucketRequest {
  /** Identifies the bucket, e.g. `requests:<key public id>`. */
  bucket: string;
  /** Capacity and per-minute refill. */
  limit: number;
}

export interface RateLimiter {
  /** Takes `amount` from the bucket when it holds that much; otherwise takes nothing. */
  take(request: BucketRequest & { amount: number }): Promise<TakeResult>;
  /**
   * Corrects a bucket after the fact: a positive `amount` gives units back (never above the
   * limit), a negative one takes more (the bucket may go below zero and recovers by refilling).
   * A bucket whose limit changed since the request began keeps its new limit. Answers the
   * bucket's state after it; `undefined` when it could not be reached.
   */
  adjust(request: BucketRequest & { amount: number }): Promise<BucketState | undefined>;
  /** The bucket's state without changing it. */
  peek(request: BucketRequest): Promise<BucketState>;
  close(): Promise<void>;
}

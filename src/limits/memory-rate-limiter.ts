import type { BucketRequest, BucketState, RateLimiter, TakeResult } from "./rate-limiter.ts";

interface Bucket {
  /** Units held at `updatedAt`; may be negative after an adjustment. */
  level: number;
  updatedAt: number;
  limit: number;
  /**
   * What a lowered limit let the bucket off (see {@link changeLimit}), owed again should the
   * limit be raised; repaid by what the cap at the limit discards (as the refill beyond it).
   */
  forgiven: number;
}

const MS_PER_MINUTE = 60_000;

/** What `bucket` holds at `now`, its limit refilled a minute, before it is capped at the limit. */
function levelAt(bucket: Bucket, now: number): number {
  return bucket.level + (Math.max(0, now - bucket.updatedAt) * bucket.limit) / MS_PER_MINUTE;
}

/**
 * Sets the bucket's level to `raw` capped at its limit: what the cap discards repays what a
 * lowered limit forgave (the bucket that was not let off would have held that much less).
 */
function setLevel(bucket: Bucket, raw: number): void {
  if (raw > bucket.limit) bucket.forgiven = Math.max(0, bucket.forgiven - (raw - bucket.limit));
  bucket.level = Math.min(bucket.limit, raw);
}

/**
 * Moves the bucket to a new limit, keeping what was used of it. Lowered, the level falls by the
 * cut, but never below zero by the cut alone (regression: rpm 100 spent, lowered to 2, waited 49
 * minutes, where a spent key stays at 0 and refills at the new rate): what that lets the bucket
 * off is remembered. Raised, it gains the difference less what a lowering forgave (regression:
 * lowered and raised again, or two replicas each taking with the limit they knew for the second
 * a change takes to reach them all, a spent bucket was given back the cut each time).
 */
function changeLimit(bucket: Bucket, limit: number): void {
  const { level } = bucket;
  const change = limit - bucket.limit;
  bucket.limit = limit;
  if (change < 0) {
    const floor = Math.min(level, 0);
    const kept = level + change;
    if (kept < floor) bucket.forgiven += floor - kept;
    bucket.level = Math.max(kept, floor);
    return;
  }
  const owed = Math.min(bucket.forgiven, change);
  bucket.forgiven -= owed;
  setLevel(bucket, level + change - owed);
}

/**
 * Token buckets in this process's memory: for a single server. A bucket that has refilled is let
 * go (a new one starts full: the same), looked for once a minute: every limited key ever used,
 * revoked ones too, kept its bucket until a restart.
 */
export class MemoryRateLimiter implements RateLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #now: () => number;
  #sweptAt: number | undefined;

  /**
   * `now`: a steady clock in milliseconds (default `performance.now`); the wall clock would
   * refill every bucket when it steps forward (NTP, a resumed VM).
   */
  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * The bucket refilled up to now; a new one starts full. One whose limit changed (the key was
   * updated) is refilled at its old limit and keeps what was used of it (see
   * {@link changeLimit}): a lowered limit grants nothing new (rebuilt full, a key throttled for
   * abuse got the new limit's whole allowance at once).
   */
  #refill(request: BucketRequest): Bucket {
    const now = this.#now();
    this.#sweep(now);
    const existing = this.#buckets.get(request.bucket);
    if (existing === undefined) {
      const bucket = { level: request.limit, updatedAt: now, limit: request.limit, forgiven: 0 };
      this.#buckets.set(request.bucket, bucket);
      return bucket;
    }
    setLevel(existing, levelAt(existing, now));
    existing.updatedAt = now;
    if (existing.limit !== request.limit) changeLimit(existing, request.limit);
    return existing;
  }

  /** Lets go of the buckets that have refilled, at most once a minute. */
  #sweep(now: number): void {
    if (this.#sweptAt !== undefined && now - this.#sweptAt < MS_PER_MINUTE) return;
    this.#sweptAt = now;
    // Full, and nothing forgiven left to owe: as a new bucket.
    for (const [name, bucket] of this.#buckets)
      if (levelAt(bucket, now) - bucket.limit >= bucket.forgiven) this.#buckets.delete(name);
  }

  /** How many buckets are held: those not yet refilled, and any the last sweep has not reached. */
  get size(): number {
    return this.#buckets.size;
  }

  #state(bucket: Bucket): BucketState {
    const missing = bucket.limit - bucket.level;
    return {
      limit: bucket.limit,
      remaining: Math.max(0, Math.floor(bucket.level)),
      resetMs: missing <= 0 ? 0 : Math.ceil((missing * MS_PER_MINUTE) / bucket.limit),
    };
  }

  async take(request: BucketRequest & { amount: number }): Promise<TakeResult> {
    const bucket = this.#refill(request);
    if (bucket.level >= request.amount) {
      bucket.level -= request.amount;
      return { allowed: true, retryAfterMs: 0, ...this.#state(bucket) };
    }
    const retryAfterMs =
      request.amount > bucket.limit
        ? Number.POSITIVE_INFINITY
        : Math.ceil(((request.amount - bucket.level) * MS_PER_MINUTE) / bucket.limit);
    return { allowed: false, retryAfterMs, ...this.#state(bucket) };
  }

  /**
   * A request that began before its key's limit changed settles under the new limit (converted
   * back to its own, the bucket would undo the new one), and what one that began under a higher
   * limit gives back repays first what the lowering forgave: its take was part of what the
   * lowering left the bucket short of (one that began after the lowering owes none of it)
   * (the correction was dropped: a key whose tpm changed mid-request lost what its running
   * requests took and did not use, up to a bucket).
   */
  async adjust(request: BucketRequest & { amount: number }): Promise<BucketState | undefined> {
    const limit = this.#buckets.get(request.bucket)?.limit ?? request.limit;
    const bucket = this.#refill({ bucket: request.bucket, limit });
    let { amount } = request;
    if (request.limit > limit && amount > 0) {
      const repaid = Math.min(bucket.forgiven, amount);
      bucket.forgiven -= repaid;
      amount -= repaid;
    }
    setLevel(bucket, bucket.level + amount);
    return this.#state(bucket);
  }

  async peek(request: BucketRequest): Promise<BucketState> {
    return this.#state(this.#refill(request));
  }

  async close(): Promise<void> {
    this.#buckets.clear();
  }
}

import type { UsageRecord } from "../store/store.ts";
import { backgroundRetryDelay } from "./billing-admission-options.ts";

/** What {@link UnfinishedSettlements} is built from. */
export interface UnfinishedSettlementsOptions {
  /** Pauses before the background attempts of a settlement; the last is repeated until it goes through. */
  delays: readonly number[];
  /** One settle attempt: resolves with the amount charged. */
  settleOnce: (usage: UsageRecord) => Promise<bigint>;
  /** A background attempt went through; `attempts` counts the background attempts, this one included. */
  onRecovered: (usage: UsageRecord, chargedNano: bigint, attempts: number) => void;
  /** A background attempt failed once {@link UnfinishedSettlements.close} began: none follows. */
  onGivenUp: (error: unknown, usage: UsageRecord) => void;
}

/**
 * The settlements of a `BillingAdmission` that have not finished: the attempts under way, and the
 * charges the store did not take, waiting for their next attempt in the background while the
 * store fails (their reservations still hold the money). Kept together because {@link close}
 * ends both: a settlement must be given up with its usage (so it can be recorded by hand), never
 * dropped without a word by the process exit.
 */
export class UnfinishedSettlements {
  readonly #delays: readonly number[];
  readonly #settleOnce: UnfinishedSettlementsOptions["settleOnce"];
  readonly #onRecovered: UnfinishedSettlementsOptions["onRecovered"];
  readonly #onGivenUp: UnfinishedSettlementsOptions["onGivenUp"];
  /** Settlements waiting for their next background attempt. */
  readonly #pending = new Map<
    string,
    {
      timer: NodeJS.Timeout;
      usage: UsageRecord;
      /** Its next attempt, now. */
      attempt: () => Promise<void>;
      /** Its last attempt ({@link close}): what fails is given up. */
      lastAttempt: () => Promise<void>;
    }
  >();
  /** Settlement attempts under way (a request's own, or a background one): {@link close} waits for them. */
  readonly #running = new Set<Promise<void>>();
  /** Set by {@link close}: a settlement that fails from now on is given up at once, not retried later. */
  #closing = false;

  constructor(options: UnfinishedSettlementsOptions) {
    this.#delays = options.delays;
    this.#settleOnce = options.settleOnce;
    this.#onRecovered = options.onRecovered;
    this.#onGivenUp = options.onGivenUp;
  }

  /** Whether {@link close} began: a settlement that fails now has no later attempt. */
  get closing(): boolean {
    return this.#closing;
  }

  /** Settlements waiting for their next background attempt. */
  get waiting(): number {
    return this.#pending.size;
  }

  /** The charges of the settlements waiting for their next background attempt. */
  *waitingUsages(): Generator<UsageRecord> {
    for (const { usage } of this.#pending.values()) yield usage;
  }

  /** Runs a settlement attempt, known to {@link close} while it runs. */
  async track(attempt: Promise<void>): Promise<void> {
    this.#running.add(attempt);
    try {
      await attempt;
    } finally {
      this.#running.delete(attempt);
    }
  }

  /**
   * Settles `usage` in the background, from the first of the delays on, until it goes through;
   * then `charged` is told what it cost.
   */
  retryInBackground(usage: UsageRecord, charged: (chargedNano: bigint) => Promise<void>): void {
    this.#schedule(usage, charged, 0);
  }

  /**
   * Tries every waiting settlement now rather than at its next pause: a write went through, so
   * the store takes writes again. Without it, charges waited out their pause (up to 30 s) after
   * the store was back, and `/ready` said all the while that the store takes no writes, keeping
   * every replica out of a load balancer's rotation. One that fails again waits its next pause.
   */
  retryNow(): void {
    this.#attemptNow(Number.POSITIVE_INFINITY);
  }

  /**
   * Tries the first waiting settlement now, as a probe of whether the store takes writes again
   * (`/ready`: with no request coming, nothing else would find out before the pause ends); if it
   * goes through, the others follow at once (see {@link retryNow}).
   */
  probeNow(): void {
    this.#attemptNow(1);
  }

  /** Runs the next attempt of the first `count` waiting settlements now, in the background. */
  #attemptNow(count: number): void {
    if (this.#closing) return;
    let left = count;
    for (const [id, { timer, attempt }] of this.#pending) {
      if (left-- <= 0) return;
      clearTimeout(timer);
      this.#pending.delete(id);
      void this.track(attempt());
    }
  }

  /**
   * Waits for the attempts under way, then tries every waiting settlement once more, now; what
   * still fails is given up (`onGivenUp`).
   */
  async close(): Promise<void> {
    this.#closing = true;
    // Attempts under way first: one that fails now is given up with its usage, as below. Left
    // running, it would have scheduled a retry that the process exit drops without a word.
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { timer } of pending) clearTimeout(timer);
    await Promise.all(pending.map(({ lastAttempt }) => lastAttempt()));
  }

  #schedule(usage: UsageRecord, charged: (chargedNano: bigint) => Promise<void>, attempts: number): void {
    const delay = backgroundRetryDelay(this.#delays, attempts);
    const attempt = async () => {
      this.#pending.delete(usage.id);
      let chargedNano: bigint;
      try {
        chargedNano = await this.#settleOnce(usage);
      } catch (error) {
        if (closing || this.#closing) this.#onGivenUp(error, usage);
        else this.#schedule(usage, charged, attempts + 1);
        return;
      }
      this.#onRecovered(usage, chargedNano, attempts + 1);
      // The store takes writes again: the others need not wait out their pauses.
      this.retryNow();
      await charged(chargedNano);
    };
    let closing = false;
    const timer = setTimeout(() => void this.track(attempt()), delay);
    this.#pending.set(usage.id, {
      timer,
      usage,
      attempt,
      lastAttempt: () => {
        closing = true;
        return attempt();
      },
    });
  }
}

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
    { timer: NodeJS.Timeout; usage: UsageRecord; attempt: () => Promise<void> }
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
    await Promise.all(pending.map(({ attempt }) => attempt()));
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
      await charged(chargedNano);
    };
    let closing = false;
    const timer = setTimeout(() => void this.track(attempt()), delay);
    this.#pending.set(usage.id, {
      timer,
      usage,
      attempt: () => {
        closing = true;
        return attempt();
      },
    });
  }
}

import type { Store, UsageRecord } from "../store/store.ts";
import { backgroundRetryDelay } from "./billing-admission-options.ts";

/** What names a reservation whose reserve failed without an answer. */
export type UnclearReservation = Pick<
  UsageRecord,
  "id" | "requestId" | "accountId" | "keyPublicId" | "model" | "user" | "createdAt"
>;

/**
 * Releases, in the background, the reservations of reserves that failed without an answer but
 * may have gone through (see `mayHaveReserved`): a reserve statement left in the socket of a
 * database that hung runs once it resumes, and its reservation then held the account's money,
 * belonging to no request, until its lease expired and a sweep released it (over a minute of
 * wrong 403s for an account near its limit).
 *
 * A release settles the reservation at no cost (the store's settle: idempotent, and harmless
 * where the reservation was never made), retried on the settles' background delays until the
 * store takes it; its usage row of no cost says the request was refused (`store_unavailable`),
 * as the row of a request refused after its reserve does (a full queue). A reserve that runs even
 * later than its release leaves its reservation to the sweep, as before. Releases still waiting
 * at {@link stop} are dropped: the next start releases what this replica left.
 */
export class UnclearReservations {
  readonly #store: Pick<Store, "settle">;
  readonly #delays: readonly number[];
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;

  constructor(store: Pick<Store, "settle">, delays: readonly number[]) {
    this.#store = store;
    this.#delays = delays;
  }

  /** Releases `reservation` from the first background delay on. */
  release(reservation: UnclearReservation): void {
    this.#schedule(
      {
        ...reservation,
        promptTokens: 0,
        completionTokens: 0,
        costNano: 0n,
        finishReason: undefined,
        errorCode: "store_unavailable",
        queueMs: undefined,
        firstTokenMs: undefined,
        totalMs: 0,
        estimated: false,
      },
      0,
    );
  }

  /** Drops the releases still waiting. */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  #schedule(usage: UsageRecord, attempts: number): void {
    if (this.#stopped) return;
    const delay = backgroundRetryDelay(this.#delays, attempts);
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#store.settle(usage).catch(() => this.#schedule(usage, attempts + 1));
    }, delay);
    this.#timers.add(timer);
  }
}

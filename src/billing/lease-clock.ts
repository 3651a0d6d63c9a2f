/**
 * The clock reservation leases are written and judged by: the store's, followed between readings
 * (one per lease round) on this machine's clocks.
 *
 * Replicas share one PostgreSQL database but not one clock. Were leases written and swept by each
 * replica's own wall clock, a replica whose clock ran ahead of the others by more than a lease's
 * margin (a VM resumed with a stale clock, NTP stepping one machine) would take their live
 * reservations for expired and release them, and their accounts could then be spent twice. On the
 * database's clock every replica reckons the same time.
 *
 * Between readings the store's time is reckoned twice: on the steady clock (`performance.now`,
 * which no step of the wall clock moves, but which stands still while the machine is suspended)
 * and on the wall clock (which runs on through a suspend, but steps). Each use takes the reckoning
 * that errs on the safe side: a lease is written to end at the later of the two (a lease too long
 * only keeps a dead replica's money a little longer; one too short lets another replica take a
 * live reservation for expired), and expired leases are judged at the earlier (a sweep that comes
 * a little late releases nothing live).
 */
export class LeaseClock {
  readonly #steadyNow: () => number;
  readonly #wallNow: () => number;
  /** The store's time less the steady clock's, as last measured. */
  #steadyOffsetMs: number;
  /** The store's time less the wall clock's, as last measured. */
  #wallOffsetMs = 0;

  /**
   * `steadyNow`: a monotonic clock in milliseconds (default `performance.now`); `wallNow`: this
   * machine's clock (default `Date.now`). Until the first {@link sync}, the store's time is taken
   * to be this machine's.
   */
  constructor(options: { steadyNow?: () => number; wallNow?: () => number } = {}) {
    this.#steadyNow = options.steadyNow ?? (() => performance.now());
    this.#wallNow = options.wallNow ?? Date.now;
    this.#steadyOffsetMs = this.#wallNow() - this.#steadyNow();
  }

  /** This process's steady clock, in milliseconds from an arbitrary origin. */
  steadyNow(): number {
    return this.#steadyNow();
  }

  /** The store's time now, for a lease written now to count from: the later reckoning. */
  now(): number {
    return Math.max(this.#steadyNow() + this.#steadyOffsetMs, this.#wallNow() + this.#wallOffsetMs);
  }

  /** The store's time now, for judging which leases have expired: the earlier reckoning. */
  earliestNow(): number {
    return Math.min(this.#steadyNow() + this.#steadyOffsetMs, this.#wallNow() + this.#wallOffsetMs);
  }

  /**
   * Reads the store's clock with `readStoreTime` and follows it from then on; the reading is
   * taken to be from halfway through its round trip. When the read fails, the last one stands.
   */
  async sync(readStoreTime: () => Promise<number>): Promise<void> {
    const sentAt = this.#steadyNow();
    const sentAtWall = this.#wallNow();
    const storeTime = await readStoreTime();
    const receivedAt = this.#steadyNow();
    const receivedAtWall = this.#wallNow();
    this.#steadyOffsetMs = storeTime - (sentAt + receivedAt) / 2;
    this.#wallOffsetMs = storeTime - (sentAtWall + receivedAtWall) / 2;
  }
}

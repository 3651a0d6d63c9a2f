/**
 * The clock reservation leases are written and judged by: the store's, followed on this
 * process's steady clock between readings.
 *
 * Replicas share one PostgreSQL database but not one clock. Were leases written and swept by each
 * replica's own wall clock, a replica whose clock ran ahead of the others by more than a lease's
 * margin (a VM resumed with a stale clock, NTP stepping one machine) would take their live
 * reservations for expired and release them, and their accounts could then be spent twice. On the
 * database's clock every replica reckons the same time. Between readings (one per lease round)
 * the time is carried on `performance.now`, which no step of the wall clock moves.
 */
export class LeaseClock {
  readonly #steadyNow: () => number;
  /** The store's time less the steady clock's, as last measured. */
  #offsetMs: number;

  /**
   * `steadyNow`: a monotonic clock in milliseconds (default `performance.now`). Until the first
   * {@link sync}, the store's time is taken to be this machine's (`Date.now`).
   */
  constructor(options: { steadyNow?: () => number } = {}) {
    this.#steadyNow = options.steadyNow ?? (() => performance.now());
    this.#offsetMs = Date.now() - this.#steadyNow();
  }

  /** This process's steady clock, in milliseconds from an arbitrary origin. */
  steadyNow(): number {
    return this.#steadyNow();
  }

  /** The store's time now, in milliseconds since the epoch, as this process reckons it. */
  now(): number {
    return this.#steadyNow() + this.#offsetMs;
  }

  /**
   * Reads the store's clock with `readStoreTime` and follows it from then on; the reading is
   * taken to be from halfway through its round trip. When the read fails, the last one stands.
   */
  async sync(readStoreTime: () => Promise<number>): Promise<void> {
    const sentAt = this.#steadyNow();
    const storeTime = await readStoreTime();
    const receivedAt = this.#steadyNow();
    this.#offsetMs = storeTime - (sentAt + receivedAt) / 2;
  }
}

/**
 * An endpoint's `max_connections`, kept by Tollgate in front of undici's pool: a request waits
 * here for a slot and goes to the pool only once it has one, so the pool never queues.
 *
 * Left to undici's own queue, a request whose client gave up while it waited still went out when
 * a connection freed: undici gave it the connection, and aborting it there closed that connection
 * (HTTP/1.1 cannot take back a request it began), so each abandoned waiter cost the requests
 * behind it a new connection (a TLS handshake, against a distant upstream) and their place in the
 * line. Here a waiter that gives up simply leaves the line.
 */
export class ConnectionSlots {
  readonly #limit: number;
  #used = 0;
  /** Waiters in arrival order (a Set keeps insertion order and deletes in constant time). */
  readonly #waiting = new Set<() => void>();

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(`max_connections must be at least 1: ${limit}`);
    this.#limit = limit;
  }

  /**
   * Calls `granted` once a slot is free (at once when one is), the slot then held until
   * {@link release}. Returns a function that withdraws the request while it still waits (it does
   * nothing once the slot was granted).
   */
  acquire(granted: () => void): () => void {
    if (this.#used < this.#limit) {
      this.#used++;
      granted();
      return () => {};
    }
    this.#waiting.add(granted);
    return () => {
      this.#waiting.delete(granted);
    };
  }

  /** Gives a slot back: to the first waiter, if any. */
  release(): void {
    const next = this.#waiting.values().next();
    if (next.done === true) {
      this.#used--;
      return;
    }
    this.#waiting.delete(next.value);
    next.value();
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    return this.#waiting.size;
  }
}

import { FairQueue } from "../fair-queue.ts";

/**
 * An endpoint's `max_connections`, kept by Tollgate in front of undici's pool: a request waits
 * here for a slot and goes to the pool only once it has one, so the pool never queues.
 *
 * Left to undici's own queue, a request whose client gave up while it waited still went out when
 * a connection freed: undici gave it the connection, and aborting it there closed that connection
 * (HTTP/1.1 cannot take back a request it began), so each abandoned waiter cost the requests
 * behind it a new connection (a TLS handshake, against a distant upstream) and their place in the
 * line. Here a waiter that gives up simply leaves the line, and the line is shared fairly between
 * tenants (fair-queue.ts): an account with a burst of requests does not hold every connection
 * while another account's request waits behind the whole burst.
 */
export class ConnectionSlots {
  readonly #limit: number;
  #used = 0;
  readonly #waiting = new FairQueue<() => void>();

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(`max_connections must be at least 1: ${limit}`);
    this.#limit = limit;
  }

  /**
   * Calls `granted` once a slot is free (at once when one is), the slot then held for `tenant`
   * (its account; "" for none) until {@link release}. Returns a function that withdraws the
   * request while it still waits (it does nothing once the slot was granted).
   */
  acquire(granted: () => void, tenant = ""): () => void {
    if (this.#used < this.#limit) {
      this.#used++;
      this.#waiting.start(tenant);
      granted();
      return () => {};
    }
    this.#waiting.push(tenant, granted);
    return () => {
      this.#waiting.delete(tenant, granted);
    };
  }

  /** Gives back a slot `tenant` held: to the waiter whose turn it is, if any. */
  release(tenant = ""): void {
    this.#waiting.finished(tenant);
    const next = this.#waiting.shift();
    if (next === undefined) {
      this.#used--;
      return;
    }
    next.item();
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    return this.#waiting.size;
  }
}

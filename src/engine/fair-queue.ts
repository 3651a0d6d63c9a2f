/**
 * A wait queue shared fairly between tenants (the accounts requests spend from): a model's
 * sequences, an endpoint's connections. One line per tenant, first come first served within it;
 * the next turn goes to the tenant running the fewest of the resource now; between tenants running
 * as many, to the one whose last turn is the longest ago (round robin: with one connection, a
 * burst and a single request take turns), and between tenants that had none yet, to the one whose
 * first request has waited longest.
 *
 * First come first served across tenants let one account that sends a burst (a batch job, a
 * retry storm, a leaked key without limits) hold every place in the queue and every turn for as
 * long as it kept sending: another account's single request waited behind all of it, or found the
 * queue full. Here that request runs at the next free turn, and a full queue makes room for it by
 * refusing the burst's latest arrival ({@link FairQueue.makeRoomFor}).
 *
 * The queue counts what each tenant runs and when it last began to ({@link FairQueue.started},
 * {@link FairQueue.finished}), and forgets a tenant once it neither waits nor runs. Choosing a
 * turn costs one step per tenant that waits.
 */
export class FairQueue<Item> {
  /** Waiting items by tenant, each line in arrival order, with its arrival number. */
  readonly #lines = new Map<string, Map<Item, number>>();
  /** How many of the resource each tenant runs now (absent: none). */
  readonly #running = new Map<string, number>();
  /** When each tenant that waits or runs last began to run (its {@link started} call's number). */
  readonly #lastStart = new Map<string, number>();
  #size = 0;
  #arrivals = 0;
  #starts = 0;

  /** Items waiting now. */
  get size(): number {
    return this.#size;
  }

  /** Items waiting now, tenant by tenant. */
  *items(): IterableIterator<Item> {
    for (const line of this.#lines.values()) yield* line.keys();
  }

  /** Puts `item` at the end of its tenant's line. */
  push(tenant: string, item: Item): void {
    let line = this.#lines.get(tenant);
    if (line === undefined) {
      line = new Map();
      this.#lines.set(tenant, line);
    }
    line.set(item, this.#arrivals++);
    this.#size++;
  }

  /** Takes `item` out of its tenant's line; `false` if it was not waiting. */
  delete(tenant: string, item: Item): boolean {
    const line = this.#lines.get(tenant);
    if (line === undefined || !line.delete(item)) return false;
    this.#size--;
    if (line.size === 0) {
      this.#lines.delete(tenant);
      if (!this.#running.has(tenant)) this.#lastStart.delete(tenant);
    }
    return true;
  }

  /**
   * Takes the item whose turn it is (see {@link FairQueue}), `undefined` when none waits. The
   * caller then counts it as {@link started} if it runs.
   */
  shift(): { tenant: string; item: Item } | undefined {
    let best: { tenant: string; item: Item; rank: readonly [number, number, number] } | undefined;
    for (const [tenant, line] of this.#lines) {
      const [item, arrival] = line.entries().next().value as [Item, number];
      const rank = [this.#running.get(tenant) ?? 0, this.#lastStart.get(tenant) ?? -1, arrival] as const;
      if (best === undefined || isBefore(rank, best.rank)) best = { tenant, item, rank };
    }
    if (best === undefined) return undefined;
    this.delete(best.tenant, best.item);
    return { tenant: best.tenant, item: best.item };
  }

  /**
   * For a queue that holds at most `limit` items and is full: the item to refuse so that
   * `tenant`'s request can wait, or `undefined` when it is the newcomer that should be refused. An
   * item is refused only where its tenant waits with more than one request more than `tenant`
   * would: the latest arrival of the tenant waiting with the most (taken out of the queue). Shares
   * that differ by one stay as they are, so that two tenants sending as fast do not keep refusing
   * each other's waiting requests.
   */
  makeRoomFor(tenant: string): Item | undefined {
    const own = this.#lines.get(tenant)?.size ?? 0;
    let longest: { tenant: string; line: Map<Item, number> } | undefined;
    for (const [other, line] of this.#lines)
      if (line.size > (longest?.line.size ?? 0)) longest = { tenant: other, line };
    if (longest === undefined || own + 1 >= longest.line.size) return undefined;
    let latest: Item | undefined;
    for (const item of longest.line.keys()) latest = item;
    this.delete(longest.tenant, latest as Item);
    return latest;
  }

  /** `tenant` began to run one more of the resource. */
  started(tenant: string): void {
    this.#running.set(tenant, (this.#running.get(tenant) ?? 0) + 1);
    this.#lastStart.set(tenant, this.#starts++);
  }

  /** `tenant` runs one fewer. */
  finished(tenant: string): void {
    const running = (this.#running.get(tenant) ?? 0) - 1;
    if (running > 0) this.#running.set(tenant, running);
    else {
      this.#running.delete(tenant);
      if (!this.#lines.has(tenant)) this.#lastStart.delete(tenant);
    }
  }
}

/** Whether rank `a` comes before rank `b`, comparing their numbers in order. */
function isBefore(a: readonly number[], b: readonly number[]): boolean {
  for (let index = 0; index < a.length; index++)
    if (a[index] !== b[index]) return (a[index] as number) < (b[index] as number);
  return false;
}

/**
 * A wait queue shared fairly between tenants (the accounts requests spend from): a model's
 * sequences, an endpoint's connections. One line per tenant, first come first served within it.
 * The next turn goes to the tenant running the fewest of the resource now; between tenants running
 * as many, by start-time fair queuing: each request is tagged, as it comes, with the turn its
 * tenant would have if turns went round, one per tenant (its tenant's previous tag plus one, and
 * no earlier than the tag of the last request to start), and the lowest tag goes first, the
 * earliest arrival between equal tags. With one connection, a backlog and two accounts that send
 * one request at a time each get a third of the turns.
 *
 * First come first served across tenants let one account that sends a burst (a batch job, a
 * retry storm, a leaked key without limits) hold every place in the queue and every turn for as
 * long as it kept sending: another account's single request waited behind all of it, or found the
 * queue full. Here that request runs at the next free turn, and a full queue makes room for it by
 * refusing the burst's latest arrival ({@link FairQueue.makeRoomFor}).
 *
 * A tenant is forgotten once it neither waits nor runs and its tags are used up (the last request
 * to start had a tag at least as late): one that comes back then starts at the current turn, and
 * one that sends a request as soon as its last one ended cannot jump ahead of a backlog by being
 * forgotten in between. Choosing a turn costs one step per tenant that waits.
 */
export class FairQueue<Item> {
  /** Waiting items by tenant, each line in arrival order, with its tags. */
  readonly #lines = new Map<string, Map<Item, Tags>>();
  /** Tenants that wait, run, or ran lately; see {@link FairQueue}. */
  readonly #tenants = new Map<string, TenantState>();
  /** Tenants that neither wait nor run, kept until their tags are used up. */
  readonly #idle = new Set<string>();
  /** The start tag of the last request to start, or later: no new request is tagged earlier. */
  #turn = 0;
  #size = 0;
  #arrivals = 0;

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
    line.set(item, { arrival: this.#arrivals++, start: this.#tag(tenant) });
    this.#size++;
  }

  /**
   * Takes `item` out of its tenant's line (its client gave up, say); `false` if it was not waiting.
   * The last of a line gives its turn back to its tenant.
   */
  delete(tenant: string, item: Item): boolean {
    const line = this.#lines.get(tenant);
    const tags = line?.get(item);
    if (line === undefined || tags === undefined) return false;
    const last = lastKey(line);
    line.delete(item);
    this.#size--;
    const state = this.#tenants.get(tenant);
    if (last === item && state !== undefined) state.finish = tags.start;
    if (line.size === 0) {
      this.#lines.delete(tenant);
      this.#settle(tenant);
    }
    return true;
  }

  /**
   * Takes the item whose turn it is (see {@link FairQueue}), `undefined` when none waits; it then
   * counts as running for its tenant, until {@link finished}.
   */
  shift(): { tenant: string; item: Item } | undefined {
    let best: { tenant: string; item: Item; rank: readonly [number, number, number] } | undefined;
    for (const [tenant, line] of this.#lines) {
      const [item, tags] = line.entries().next().value as [Item, Tags];
      const rank = [this.#tenants.get(tenant)?.running ?? 0, tags.start, tags.arrival] as const;
      if (best === undefined || isBefore(rank, best.rank)) best = { tenant, item, rank };
    }
    if (best === undefined) return undefined;
    const { tenant, item } = best;
    const line = this.#lines.get(tenant) as Map<Item, Tags>;
    line.delete(item);
    this.#size--;
    if (line.size === 0) this.#lines.delete(tenant);
    this.#run(tenant);
    this.#advance(best.rank[1]);
    return { tenant, item };
  }

  /** A request of `tenant` got the resource without waiting: it counts as running until {@link finished}. */
  start(tenant: string): void {
    const start = this.#tag(tenant);
    this.#run(tenant);
    this.#advance(start);
  }

  /** A request of `tenant` gave the resource back. */
  finished(tenant: string): void {
    const state = this.#tenants.get(tenant);
    if (state === undefined || state.running === 0) return;
    state.running--;
    this.#settle(tenant);
  }

  /**
   * For a queue that holds at most its limit of items and is full: the item to refuse so that a
   * request of `tenant` can wait, or `undefined` when it is the newcomer that should be refused.
   * Each tenant's load is what it runs and what it waits with. The item refused is the latest
   * arrival of the tenant with waiting requests and the greatest load, and only where that load
   * is at least two above `tenant`'s, so that the swap leaves it no lower than `tenant`'s: loads
   * that differ by one stay as they are (two tenants sending as fast do not keep refusing each
   * other's requests), and a tenant that runs nothing does not give way to one that runs everything.
   */
  makeRoomFor(tenant: string): Item | undefined {
    const load = (name: string) =>
      (this.#tenants.get(name)?.running ?? 0) + (this.#lines.get(name)?.size ?? 0);
    let heaviest: { tenant: string; load: number } | undefined;
    for (const other of this.#lines.keys()) {
      const otherLoad = load(other);
      if (otherLoad > (heaviest?.load ?? 0)) heaviest = { tenant: other, load: otherLoad };
    }
    if (heaviest === undefined || load(tenant) + 1 >= heaviest.load) return undefined;
    const latest = lastKey(this.#lines.get(heaviest.tenant) as Map<Item, Tags>) as Item;
    this.delete(heaviest.tenant, latest);
    return latest;
  }

  /** The start tag of `tenant`'s next request, taken: its turn, if turns went round. */
  #tag(tenant: string): number {
    let state = this.#tenants.get(tenant);
    if (state === undefined) {
      state = { running: 0, finish: 0 };
      this.#tenants.set(tenant, state);
    }
    this.#idle.delete(tenant);
    const start = Math.max(this.#turn, state.finish);
    state.finish = start + 1;
    return start;
  }

  #run(tenant: string): void {
    const state = this.#tenants.get(tenant) as TenantState;
    state.running++;
  }

  /** A request tagged `start` began to run: later tags begin no earlier; idle tenants used up go. */
  #advance(start: number): void {
    if (start <= this.#turn) return;
    this.#turn = start;
    for (const tenant of this.#idle) this.#settle(tenant);
  }

  /** Forgets `tenant` once it neither waits nor runs and its tags are used up; else keeps it idle. */
  #settle(tenant: string): void {
    const state = this.#tenants.get(tenant);
    if (state === undefined || state.running > 0 || this.#lines.has(tenant)) return;
    if (state.finish <= this.#turn) {
      this.#tenants.delete(tenant);
      this.#idle.delete(tenant);
    } else this.#idle.add(tenant);
    // Nothing waits or runs: no tag is left to compare with, and turns begin again.
    if (this.#idle.size === this.#tenants.size) {
      this.#tenants.clear();
      this.#idle.clear();
      this.#turn = 0;
    }
  }
}

/** A waiting request's place: when it came (a counter) and its start tag (see {@link FairQueue}). */
interface Tags {
  arrival: number;
  start: number;
}

interface TenantState {
  running: number;
  /** The start tag its next request gets, unless the turn has moved past it. */
  finish: number;
}

/** The key put in `map` last (a Map keeps insertion order), `undefined` for an empty one. */
function lastKey<Key>(map: ReadonlyMap<Key, unknown>): Key | undefined {
  let last: Key | undefined;
  for (const key of map.keys()) last = key;
  return last;
}

/** Whether rank `a` comes before rank `b`, comparing their numbers in order. */
function isBefore(a: readonly number[], b: readonly number[]): boolean {
  for (let index = 0; index < a.length; index++)
    if (a[index] !== b[index]) return (a[index] as number) < (b[index] as number);
  return false;
}

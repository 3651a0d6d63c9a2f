import { AppError } from "../../errors/app-error.ts";
import { FairQueue } from "../fair-queue.ts";

/** An item borrowed from a {@link LeasePool}; `release()` returns it (calling it twice is harmless). */
export interface Lease<Item> {
  readonly item: Item;
  release(): void;
}

/** How a request waits in a {@link LeasePool}, beyond its signal. */
export interface AcquireOptions {
  /**
   * Called (once) when the pool is retired while the request waits, or when it starts waiting in a
   * retired pool: `leave()` takes it out of the queue (it then resolves `undefined`) and returns
   * `true` if it still waits. Until the returned promise settles, it does not count in `waiting`:
   * it is being moved, and counts where it moves to.
   */
  onRetired?: (leave: () => boolean) => Promise<void>;
  /**
   * It moved from another pool's queue, where it waited since then (`performance.now()`): it waits
   * ahead of requests that came later and of any not moved, past `maxQueue` (it was admitted by
   * the other queue's).
   */
  since?: number;
  /**
   * Who the request is for (its account): tenants share the queue fairly (fair-queue.ts). Requests
   * without one share a line of their own.
   */
  tenant?: string | undefined;
}

/**
 * A fixed set of items (a model's context sequences) lent to one request at a time, with a bounded
 * wait queue in front of it, shared fairly between tenants (fair-queue.ts): first in, first out
 * within a tenant's requests.
 */
export interface LeasePool<Item> {
  /**
   * Lends a free item, or waits for one. Throws `model_overloaded` when `maxQueue` requests already
   * wait, unless another tenant has more than its share (FairQueue.makeRoomFor: its latest waiting
   * request is then refused in its place, with the same error). Resolves `undefined` when `signal` aborts while waiting (the request
   * leaves the queue) or when the pool closes.
   */
  acquire(signal: AbortSignal, options?: AcquireOptions): Promise<Lease<Item> | undefined>;
  /** Items lent out right now. */
  readonly leased: number;
  /** Requests waiting right now. */
  readonly waiting: number;
  /**
   * A reload replaced the pool's engine: every waiting request, and any that comes to wait later,
   * is offered to leave ({@link AcquireOptions.onRetired}); lending goes on as before.
   */
  retire(): void;
  /** Wakes every waiting request with `undefined`; later `acquire` calls resolve `undefined` too. */
  close(): void;
  /** Resolves once no item is lent out. */
  whenIdle(): Promise<void>;
}

interface Waiter<Item> {
  resolve(lease: Lease<Item> | undefined): void;
  /** Refuses it while it waits (its place went to another tenant's request). */
  reject(error: AppError): void;
  since: number | undefined;
  tenant: string;
  onRetired: AcquireOptions["onRetired"];
  /** Offered to leave, and not decided yet: counted where it moves to. */
  moving: boolean;
}

/**
 * Creates a {@link LeasePool} over `items`, with at most `maxQueue` requests waiting; `modelId`
 * names the model in the refusal.
 */
export function createLeasePool<Item>(options: {
  items: readonly Item[];
  maxQueue: number;
  modelId?: string;
}): LeasePool<Item> {
  const free = [...options.items];
  /** Requests that moved from a retired pool's queue, by how long they have waited: served first. */
  const moved: Waiter<Item>[] = [];
  /** Everyone else. */
  const queue = new FairQueue<Waiter<Item>>();
  let leased = 0;
  let closed = false;
  let retired = false;
  let idleWaiters: (() => void)[] = [];

  const remove = (waiter: Waiter<Item>): boolean => {
    if (waiter.since === undefined) return queue.delete(waiter.tenant, waiter);
    const index = moved.indexOf(waiter);
    if (index >= 0) moved.splice(index, 1);
    return index >= 0;
  };
  const waiters = (): Waiter<Item>[] => [...moved, ...queue.items()];
  // The counts as they are: requests moved here by a reload may wait past `maxQueue`.
  const overloaded = (detail: string, waiting: number) =>
    new AppError(
      "model_overloaded",
      `The model${options.modelId === undefined ? "" : ` '${options.modelId}'`} is busy with other requests and its queue is full (${leased} running, ${waiting} waiting)${detail}. Please retry shortly.`,
      { retryAfterSeconds: 1 },
    );

  /** Lends `item` to a request of `tenant`, counted as running in the queue already. */
  const lend = (item: Item, tenant: string): Lease<Item> => {
    leased += 1;
    let released = false;
    return {
      item,
      release: () => {
        if (released) return;
        released = true;
        leased -= 1;
        queue.finished(tenant);
        let next: Waiter<Item> | undefined;
        if (!closed) {
          next = moved.shift();
          if (next !== undefined) queue.start(next.tenant);
          else next = queue.shift()?.item;
        }
        if (next === undefined) free.push(item);
        else next.resolve(lend(item, next.tenant));
        if (leased === 0) {
          for (const resolve of idleWaiters) resolve();
          idleWaiters = [];
        }
      },
    };
  };

  const offer = (waiter: Waiter<Item>) => {
    const onRetired = waiter.onRetired;
    if (onRetired === undefined) return;
    waiter.onRetired = undefined;
    waiter.moving = true;
    const leave = () => {
      if (!remove(waiter)) return false;
      waiter.resolve(undefined);
      return true;
    };
    void onRetired(leave).finally(() => {
      waiter.moving = false;
    });
  };

  return {
    get leased() {
      return leased;
    },
    get waiting() {
      // Only a retired pool has waiters being moved, which count where they move to.
      return retired ? waiters().filter((waiter) => !waiter.moving).length : moved.length + queue.size;
    },
    acquire(signal, acquireOptions) {
      if (closed || signal.aborted) return Promise.resolve(undefined);
      const tenant = acquireOptions?.tenant ?? "";
      if (free.length > 0) {
        queue.start(tenant);
        return Promise.resolve(lend(free.pop()!, tenant));
      }
      const since = acquireOptions?.since;
      const waiting = moved.length + queue.size;
      if (since === undefined && waiting >= options.maxQueue) {
        // A tenant with more than its share gives its latest place to this one; not in a retired
        // pool, whose waiters may be moving to the new engine's queue.
        const refused = retired ? undefined : queue.makeRoomFor(tenant);
        if (refused === undefined) return Promise.reject(overloaded("", waiting));
        refused.reject(overloaded(", and the place this request held went to another account's", waiting));
      }
      return new Promise((resolve, reject) => {
        const waiter: Waiter<Item> = {
          resolve: (lease) => {
            signal.removeEventListener("abort", onAbort);
            resolve(lease);
          },
          reject: (error) => {
            signal.removeEventListener("abort", onAbort);
            reject(error);
          },
          since,
          tenant,
          onRetired: acquireOptions?.onRetired,
          moving: false,
        };
        const onAbort = () => {
          remove(waiter);
          resolve(undefined);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        if (since === undefined) queue.push(tenant, waiter);
        else {
          // Behind those that moved and waited longer, ahead of everyone else.
          const index = moved.findIndex((other) => (other.since as number) > since);
          moved.splice(index < 0 ? moved.length : index, 0, waiter);
        }
        if (retired) offer(waiter);
      });
    },
    retire() {
      retired = true;
      for (const waiter of waiters()) offer(waiter);
    },
    close() {
      closed = true;
      for (const waiter of waiters()) {
        remove(waiter);
        waiter.resolve(undefined);
      }
    },
    whenIdle() {
      if (leased === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}

import { AppError } from "../../errors/app-error.ts";

/** An item borrowed from a {@link LeasePool}; `release()` returns it (calling it twice is harmless). */
export interface Lease<Item> {
  readonly item: Item;
  release(): void;
}

/**
 * A fixed set of items (a model's context sequences) lent to one request at a time, with a bounded
 * first-in-first-out wait queue in front of it.
 */
export interface LeasePool<Item> {
  /**
   * Lends a free item, or waits for one. Throws `model_overloaded` when `maxQueue` requests already
   * wait. Resolves `undefined` when `signal` aborts while waiting (the request leaves the queue) or
   * when the pool closes.
   */
  acquire(signal: AbortSignal): Promise<Lease<Item> | undefined>;
  /** Items lent out right now. */
  readonly leased: number;
  /** Requests waiting right now. */
  readonly waiting: number;
  /** Wakes every waiting request with `undefined`; later `acquire` calls resolve `undefined` too. */
  close(): void;
  /** Resolves once no item is lent out. */
  whenIdle(): Promise<void>;
}

interface Waiter<Item> {
  resolve(lease: Lease<Item> | undefined): void;
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
  const waiters: Waiter<Item>[] = [];
  let leased = 0;
  let closed = false;
  let idleWaiters: (() => void)[] = [];

  const lend = (item: Item): Lease<Item> => {
    leased += 1;
    let released = false;
    return {
      item,
      release: () => {
        if (released) return;
        released = true;
        leased -= 1;
        const next = closed ? undefined : waiters.shift();
        if (next === undefined) free.push(item);
        else next.resolve(lend(item));
        if (leased === 0) {
          for (const resolve of idleWaiters) resolve();
          idleWaiters = [];
        }
      },
    };
  };

  return {
    get leased() {
      return leased;
    },
    get waiting() {
      return waiters.length;
    },
    acquire(signal) {
      if (closed || signal.aborted) return Promise.resolve(undefined);
      if (free.length > 0) return Promise.resolve(lend(free.pop()!));
      if (waiters.length >= options.maxQueue) {
        return Promise.reject(
          new AppError(
            "model_overloaded",
            `The model${options.modelId === undefined ? "" : ` '${options.modelId}'`} is busy with other requests and its queue is full (${options.items.length} running, ${options.maxQueue} waiting). Please retry shortly.`,
            { retryAfterSeconds: 1 },
          ),
        );
      }
      return new Promise((resolve) => {
        const waiter: Waiter<Item> = {
          resolve: (lease) => {
            signal.removeEventListener("abort", onAbort);
            resolve(lease);
          },
        };
        const onAbort = () => {
          const index = waiters.indexOf(waiter);
          if (index >= 0) waiters.splice(index, 1);
          resolve(undefined);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        waiters.push(waiter);
      });
    },
    close() {
      closed = true;
      for (const waiter of waiters.splice(0)) waiter.resolve(undefined);
    },
    whenIdle() {
      if (leased === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}

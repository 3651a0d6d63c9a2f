import { AppError } from "../../errors/app-error.ts";

/**
 * Seconds a request refused while the model loads is told to wait: as one refused by a full
 * queue once it is loaded (a load from disk takes seconds; the message says it is loading).
 */
const LOADING_RETRY_AFTER_SECONDS = 1;

/** The requests waiting for a local model to load (see {@link createLoadWaiters}). */
export interface LoadWaiters {
  /**
   * Waits until `loading` has settled; throws when too many wait, when a request of another
   * tenant takes its place, or when `signal` aborts first. `tenant`: the account it spends from.
   */
  wait(signal: AbortSignal | undefined, tenant?: string): Promise<void>;
}

/**
 * Bounds the wait of requests for a model that is still loading: a model named by URI downloads
 * on first use, for minutes over a slow link, and every request waited for it without limit,
 * its client's disconnect unheard (found by a download review: ten requests with a 3 s client
 * timeout were held 276 s, sockets and all). As many may wait as could run and queue once it is
 * loaded (`parallel` + `max_queue`); more get 503 `model_overloaded` with a retry-after, and a
 * request whose client leaves stops waiting at once (`signal`'s reason is thrown).
 *
 * Shared between tenants as a loaded model's queue is (fair-queue.ts): when every place is taken,
 * a request of a tenant that waits with at least two fewer than the one waiting with the most
 * takes the place of that one's latest arrival, which is refused as a request finding the wait
 * full is. One account that sent a burst while the model downloaded kept every other account's
 * requests out with 503 for as long as the download lasted.
 */
export function createLoadWaiters(options: {
  modelId: string;
  capacity: number;
  /** The load under way: a new one starts when a failed download is tried again. */
  loading: () => Promise<unknown>;
}): LoadWaiters {
  /** Each tenant's waiting requests, in arrival order, by what refuses each. */
  const lines = new Map<string, Set<(error: AppError) => void>>();
  let waiting = 0;
  const overloaded = (count: number) =>
    new AppError(
      "model_overloaded",
      `The model '${options.modelId}' is still loading (its file may be downloading) and ${count === 1 ? "a request already waits" : `${count} requests already wait`} for it. Please retry shortly.`,
      { retryAfterSeconds: LOADING_RETRY_AFTER_SECONDS },
    );
  /** Takes a request out of the waiting ones (once: it may have been refused to make room). */
  const leave = (tenant: string, refuse: (error: AppError) => void) => {
    const line = lines.get(tenant);
    if (line === undefined || !line.delete(refuse)) return;
    waiting--;
    if (line.size === 0) lines.delete(tenant);
  };
  /** Refuses the latest arrival of the tenant waiting with the most, where `tenant` waits with two fewer. */
  const makeRoomFor = (tenant: string): boolean => {
    let heaviest: [string, Set<(error: AppError) => void>] | undefined;
    for (const entry of lines) if (entry[1].size > (heaviest?.[1].size ?? 0)) heaviest = entry;
    if (heaviest === undefined || (lines.get(tenant)?.size ?? 0) + 1 >= heaviest[1].size) return false;
    const latest = [...heaviest[1]].at(-1) as (error: AppError) => void;
    // Its place is free at once: a request that comes before its wait has ended finds it so.
    leave(heaviest[0], latest);
    latest(overloaded(waiting + 1));
    return true;
  };
  return {
    async wait(signal, tenant = "") {
      signal?.throwIfAborted();
      if (waiting >= options.capacity && !makeRoomFor(tenant)) throw overloaded(waiting);
      let line = lines.get(tenant);
      if (line === undefined) {
        line = new Set();
        lines.set(tenant, line);
      }
      const { promise: refused, reject: refuse } = Promise.withResolvers<never>();
      line.add(refuse);
      waiting++;
      let onAbort: (() => void) | undefined;
      try {
        await Promise.race([
          options.loading(),
          refused,
          new Promise<never>((_resolve, reject) => {
            if (signal === undefined) return;
            onAbort = () => reject(signal.reason);
            signal.addEventListener("abort", onAbort, { once: true });
          }),
        ]);
      } finally {
        leave(tenant, refuse);
        if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}

import { AppError } from "../../errors/app-error.ts";

/**
 * Seconds a request refused while the model loads is told to wait: as one refused by a full
 * queue once it is loaded (a load from disk takes seconds; the message says it is loading).
 */
const LOADING_RETRY_AFTER_SECONDS = 1;

/** The requests waiting for a local model to load (see {@link createLoadWaiters}). */
export interface LoadWaiters {
  /** Waits until `loading` has settled; throws when too many wait, or `signal` aborts first. */
  wait(signal: AbortSignal | undefined): Promise<void>;
}

/**
 * Bounds the wait of requests for a model that is still loading: a model named by URI downloads
 * on first use, for minutes over a slow link, and every request waited for it without limit,
 * its client's disconnect unheard (found by a download review: ten requests with a 3 s client
 * timeout were held 276 s, sockets and all). As many may wait as could run and queue once it is
 * loaded (`parallel` + `max_queue`); more get 503 `model_overloaded` with a retry-after, and a
 * request whose client leaves stops waiting at once (`signal`'s reason is thrown).
 */
export function createLoadWaiters(options: {
  modelId: string;
  capacity: number;
  /** The load under way: a new one starts when a failed download is tried again. */
  loading: () => Promise<unknown>;
}): LoadWaiters {
  let waiting = 0;
  return {
    async wait(signal) {
      signal?.throwIfAborted();
      if (waiting >= options.capacity) {
        throw new AppError(
          "model_overloaded",
          `The model '${options.modelId}' is still loading (its file may be downloading) and ${waiting === 1 ? "a request already waits" : `${waiting} requests already wait`} for it. Please retry shortly.`,
          { retryAfterSeconds: LOADING_RETRY_AFTER_SECONDS },
        );
      }
      waiting++;
      let onAbort: (() => void) | undefined;
      try {
        await Promise.race([
          options.loading(),
          new Promise<never>((_resolve, reject) => {
            if (signal === undefined) return;
            onAbort = () => reject(signal.reason);
            signal.addEventListener("abort", onAbort, { once: true });
          }),
        ]);
      } finally {
        waiting--;
        if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}

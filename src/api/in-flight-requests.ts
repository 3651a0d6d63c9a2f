import { AppError } from "../errors/app-error.ts";

/**
 * The requests a server is running, so a shutdown can stop taking new ones, wait for these,
 * and cut the stragglers. Each request registers the controller that aborts its generation.
 */
export class InFlightRequests {
  readonly #controllers = new Set<AbortController>();
  readonly #idle: (() => void)[] = [];
  #closing = false;

  /** True once shutdown began: new requests are refused with 503. */
  get closing(): boolean {
    return this.#closing;
  }

  get size(): number {
    return this.#controllers.size;
  }

  /**
   * Tracks a request until the returned function is called: once its work is over (its engine
   * stopped and its settlement done or handed to the background), not when its client left.
   */
  track(controller: AbortController): () => void {
    this.#controllers.add(controller);
    return () => {
      this.#controllers.delete(controller);
      if (this.#controllers.size === 0) {
        for (const resolve of this.#idle.splice(0)) resolve();
      }
    };
  }

  /** Resolves once no request is tracked. */
  whenIdle(): Promise<void> {
    if (this.#controllers.size === 0) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#idle.push(resolve);
    return promise;
  }

  /** Refuses new requests from now on. */
  beginClosing(): void {
    this.#closing = true;
  }

  /** Cuts every running request; their streams end with `reason` (default: the shutdown's). */
  abortAll(reason: AppError = shuttingDownError()): void {
    for (const controller of this.#controllers) controller.abort(reason);
  }
}

/**
 * The error a request gets when its replica could not renew its reservation's lease in time
 * (keep-leases.ts: the store did not answer this replica for most of a lease).
 */
export function leaseLapsingError(): AppError {
  return new AppError(
    "store_unavailable",
    "This server lost its connection to the database for too long to keep the request's balance reserved; the request was stopped. Retry it.",
    { retryAfterSeconds: 5 },
  );
}

/** The error a request gets when the server shuts down under it or before it. */
export function shuttingDownError(): AppError {
  return new AppError("model_unavailable", "The server is shutting down. Retry the request in a moment.", {
    retryAfterSeconds: 1,
  });
}

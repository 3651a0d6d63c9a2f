/** Aborts a request that receives nothing (no headers, no body bytes) for too long. */
export interface StallWatchdog {
  /** Combine with the caller's signal for the request. */
  signal: AbortSignal;
  /** Something arrived: start the wait again. */
  touch(): void;
  stop(): void;
}

/** A watchdog that aborts its signal with `createError()` after `milliseconds` without a touch. */
export function createStallWatchdog(options: {
  milliseconds: number;
  createError: () => Error;
}): StallWatchdog {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(options.createError()), options.milliseconds);
    timer.unref();
  };
  arm();
  return {
    signal: controller.signal,
    touch: arm,
    stop: () => clearTimeout(timer),
  };
}

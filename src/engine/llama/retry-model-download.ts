import { isTransientDownloadFailure } from "../../models/download/model-download-error.ts";

/**
 * Waits before each new attempt to download a model's file, by failed attempts so far: 30 s,
 * 1 min, 2 min, then every 5 min for as long as the engine lives. A host that answered 503 for
 * a few seconds at boot (or a network not up yet) left the model unavailable until a SIGHUP,
 * though the host answered again seconds later (found by a download review).
 */
export const defaultDownloadRetryDelays: readonly number[] = [30_000, 60_000, 120_000, 300_000];

/**
 * The delays servers use when their engines are not given their own: tests that start a real
 * server (whose engines they cannot reach) set it, and set it back.
 */
export const downloadRetrySettings: { delays: readonly number[] } = { delays: defaultDownloadRetryDelays };

/** A pending retry: when it runs, and how to call it off. */
export interface ScheduledRetry {
  /** Epoch milliseconds of the next attempt. */
  at: number;
  /** Which attempt it will be, counting the first download as 1. */
  attempt: number;
  cancel(): void;
}

/**
 * Schedules the next attempt after a failed download of a model's file, when its failure may
 * pass by itself ({@link isTransientDownloadFailure}); `undefined` otherwise, so that a 404, a
 * checksum or a full disk waits for the operator as before. `failures` counts the failed attempts,
 * this one included. The timer is unref'ed: a retry never keeps the process alive.
 */
export function scheduleDownloadRetry(options: {
  error: unknown;
  failures: number;
  delays?: readonly number[] | undefined;
  retry: () => void;
}): ScheduledRetry | undefined {
  if (!isTransientDownloadFailure(options.error)) return undefined;
  const delays = options.delays ?? downloadRetrySettings.delays;
  const delay = delays[Math.min(options.failures, delays.length) - 1] ?? delays.at(-1) ?? 0;
  const timer = setTimeout(options.retry, delay);
  timer.unref();
  return {
    at: Date.now() + delay,
    attempt: options.failures + 1,
    cancel: () => clearTimeout(timer),
  };
}

/**
 * The retries of one engine's download: {@link scheduleDownloadRetry} with the failures counted,
 * at most one pending, and none after `stop` (a reload replaced the engine, or it closed).
 */
export function createDownloadRetries(options: {
  delays?: readonly number[] | undefined;
  retry: () => void;
}) {
  let pending: ScheduledRetry | undefined;
  let failures = 0;
  let stopped = false;
  return {
    /** After a failed attempt: the next one, when `error` may pass and retries are not stopped. */
    after(error: unknown): ScheduledRetry | undefined {
      if (stopped) return undefined;
      failures++;
      pending = scheduleDownloadRetry({
        error,
        failures,
        delays: options.delays,
        retry: () => {
          pending = undefined;
          if (!stopped) options.retry();
        },
      });
      return pending;
    },
    stop(): void {
      stopped = true;
      pending?.cancel();
      pending = undefined;
    },
  };
}

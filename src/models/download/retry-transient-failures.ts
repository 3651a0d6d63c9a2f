import { setTimeout as delay } from "node:timers/promises";
import { ModelDownloadError } from "./model-download-error.ts";

/** How often and how patiently {@link retryTransientFailures} tries. */
export interface RetrySettings {
  /** Attempts in a row without progress before giving up. Default 5. */
  maxAttempts?: number | undefined;
  /** Pause before the first retry, doubled for each further one (at most 30 s). Default 1000. */
  retryDelayMilliseconds?: number | undefined;
}

const maxRetryDelayMilliseconds = 30_000;

/**
 * Start-overs (an attempt that dropped the partial file: the file changed, or the server's answer
 * did not fit what was saved) allowed in one run: the next one gives up.
 */
export const maxStartOvers = 3;

/**
 * Runs `attempt` until it succeeds, retrying a retryable {@link ModelDownloadError} (a broken
 * connection, a 5xx or 429 answer) after a growing pause, announced through `onNotice`, or after
 * the pause the server asked for with `Retry-After` (create-http-status-error.ts), if longer. Any
 * other error, an abort, or too many failures in a row end it. `progress`, when given, measures
 * what the attempts achieved (bytes saved): an attempt that took it beyond the most it has been
 * during this run does not count against the limit. Getting back to where an earlier attempt
 * had been is no progress: a server that sent the whole file, then answered the resume so that
 * the partial file was dropped (a `Content-Length` larger than the body, `206` answers without
 * the `ETag` of the `200`), had it downloaded again and again for ever, each regrown file
 * counted as progress. Attempts that started the download over (`startedOver`) are also
 * counted on their own, and the {@link maxStartOvers}th ends the run with an error saying so.
 */
export async function retryTransientFailures<T>(
  attempt: () => Promise<T>,
  options: RetrySettings & {
    signal?: AbortSignal | undefined;
    onNotice?: ((message: string) => void) | undefined;
    progress?: () => Promise<number>;
  },
): Promise<T> {
  const maxAttempts = options.maxAttempts ?? 5;
  const retryDelay = options.retryDelayMilliseconds ?? 1000;
  let failures = 0;
  let startOvers = 0;
  let lastStartOver: ModelDownloadError | undefined;
  let furthest = (await options.progress?.()) ?? 0;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      const reached = (await options.progress?.()) ?? 0;
      const progressed = reached > furthest;
      furthest = Math.max(furthest, reached);
      failures = progressed ? 1 : failures + 1;
      if (!(error instanceof ModelDownloadError) || !error.retryable) throw error;
      if (error.startedOver) {
        startOvers += 1;
        lastStartOver = error;
      }
      if (lastStartOver !== undefined && (startOvers >= maxStartOvers || failures >= maxAttempts)) {
        throw createStartOversError(error, lastStartOver, startOvers);
      }
      if (failures >= maxAttempts) throw error;
      const backoff = Math.min(retryDelay * 2 ** (failures - 1), maxRetryDelayMilliseconds);
      // A server that said how long to wait (429 or 503 with Retry-After, capped) is not asked sooner.
      const pause = Math.max(backoff, error.retryAfterMilliseconds ?? 0);
      options.onNotice?.(
        `${error.message} Retrying in ${formatSeconds(pause)} (attempt ${failures + 1} of ${maxAttempts}).`,
      );
      await delay(pause, undefined, { signal: options.signal });
    }
  }
}

/**
 * The error that ends a run in which the download started over: not worth retrying as it is (the
 * server sends the file differently each time), and saying why it started over, which the last
 * error (a broken connection, say) may not.
 */
function createStartOversError(
  last: ModelDownloadError,
  lastStartOver: ModelDownloadError,
  startOvers: number,
): ModelDownloadError {
  const reason = lastStartOver.message.replace(/;? starting over\.$/, ".");
  const times = startOvers === 1 ? "once" : `${startOvers} times`;
  const since = last === lastStartOver ? "" : ` Then: ${last.message}`;
  return new ModelDownloadError(
    "invalid-response",
    `Gave up after the download started over ${times}, the last time because: ${reason}${since} The server does not send this file consistently; try again later or download it from elsewhere.`,
    { cause: last },
  );
}

export function formatSeconds(milliseconds: number): string {
  const seconds = milliseconds / 1000;
  return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`;
}

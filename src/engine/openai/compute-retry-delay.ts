/**
 * The pause before retry number `retry` (1 for the first retry): exponential backoff
 * (`baseMs`, doubling, at most `maxMs`) with "equal jitter" (half fixed, half random) so that
 * requests that failed together do not retry together; never shorter than what the upstream
 * asked for with `retry-after`.
 */
export function computeRetryDelay(options: {
  retry: number;
  baseMs: number;
  maxMs: number;
  retryAfterMs?: number | undefined;
  random?: () => number;
}): number {
  const random = options.random ?? Math.random;
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.max(0, options.retry - 1));
  const backoff = Math.round(ceiling / 2 + (random() * ceiling) / 2);
  return Math.max(backoff, options.retryAfterMs ?? 0);
}

/**
 * The pause before retry number `retry` (1 for the first pause of a request), always with a random
 * part so that requests that failed together, or wait for the same thing, do not retry together:
 *
 * - With nothing to wait for (`restingMs` 0 or undefined): exponential backoff (`baseMs`,
 *   doubling, at most `maxMs`) with "equal jitter", half fixed and half random.
 * - While the endpoints rest for `restingMs` (a cooldown, or the `retry-after` an upstream asked
 *   for): that, plus a random part of up to the backoff or a quarter of the rest, whichever is
 *   longer: every request waiting for the same rest would otherwise come back the instant it ends.
 *   When the rest fits in `withinMs` (what the request may still wait), so does the pause.
 */
export function computeRetryDelay(options: {
  retry: number;
  baseMs: number;
  maxMs: number;
  restingMs?: number | undefined;
  /** The longest pause the caller allows; default unbounded. */
  withinMs?: number | undefined;
  random?: (() => number) | undefined;
}): number {
  const random = options.random ?? Math.random;
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.max(0, options.retry - 1));
  const resting = options.restingMs ?? 0;
  if (resting <= 0) return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  const within = options.withinMs ?? Number.POSITIVE_INFINITY;
  // Drawn within what is left rather than cut there, which would bring waiters back together at
  // the bound. A rest longer than `within` is returned as it is: the caller sees it does not fit.
  const spread = Math.min(Math.max(ceiling, resting / 4), Math.max(0, within - resting));
  return resting + random() * spread;
}

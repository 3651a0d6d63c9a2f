/**
 * A log line for a run of like events: the first is logged at once, then at most one every
 * `intervalMs`, each saying how many it stands for (`skipped`: the events since the last line
 * that were not logged). A database outage refuses every request with the same error: a line
 * with its stack for each (2,141 in ten seconds on one replica, seen) buries everything else,
 * and each request has its own request line anyway.
 */
export function throttleLog(intervalMs: number, now: () => number = performance.now.bind(performance)) {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let skipped = 0;
  return (log: (skipped: number) => void): void => {
    const time = now();
    if (time - loggedAt < intervalMs) {
      skipped++;
      return;
    }
    loggedAt = time;
    const count = skipped;
    skipped = 0;
    log(count);
  };
}

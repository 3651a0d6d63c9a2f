/**
 * A settle attempt a shutdown stopped waiting for (see `DRAIN_SETTLE_TIMEOUT_MS`): the store did
 * not answer in time, and the charge is in the journal. The statement may still commit.
 */
export class DrainSettleTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(
      `the store did not answer a settle within ${timeoutMs} ms during the shutdown; the charge is kept in the journal`,
    );
    this.name = "DrainSettleTimeoutError";
  }
}

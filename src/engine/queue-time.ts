import { createErrorMark } from "../errors/error-mark.ts";

/** How long runs that failed before their first part waited in their engine's queue, by error. */
const waited = createErrorMark<number>();

/**
 * Marks `error`, thrown from a run's first `next()`, with how long the run waited in its engine's
 * queue before it failed (a request refused after waiting, its place given to another account's):
 * its usage row then tells the wait, as a run that ended with a part does with `queueMs`.
 */
export function withQueueTime<Failure extends object>(error: Failure, queueMs: number): Failure {
  return waited.mark(error, queueMs);
}

/** The wait {@link withQueueTime} marked `error` with, if any. */
export function queueTimeOf(error: unknown): number | undefined {
  return waited.of(error);
}

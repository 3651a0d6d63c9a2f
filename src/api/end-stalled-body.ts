import type { Readable } from "node:stream";
import { describeBodyStall } from "./answer-client-error.ts";

/** What a request's body, being read, tells {@link endStalledBody}'s watch. */
export interface StalledBodyWatch {
  /** A piece of the body arrived: the pause it ended is over, the next one starts. */
  arrived(): void;
  /** The body is in, or its request answered (or gone): nothing more to watch. Idempotent. */
  stop(): void;
}

/**
 * Ends `body`, the stream a request's body is read from as it arrives, with 408
 * `request_timeout` once none of it has arrived for `stallMs` (nginx's `client_body_timeout`):
 * `release` runs first (the budget's bytes go back at once), then `body` fails with the 408,
 * which the body's reader answers, closing the connection (Fastify closes it after any body
 * that failed to arrive).
 *
 * A body that stops arriving held its bytes of the body budget, a socket and a request until the
 * request timeout (5 minutes): a client that sent most of a body and stalled (or vanished
 * without a FIN: a phone that lost its network) kept its account's share of the budget out of
 * every other request of that account's, and a few such accounts kept it out of everyone's. A
 * body that keeps arriving, however slowly, is not cut: the request timeout still bounds it.
 */
export function endStalledBody(body: Readable, stallMs: number, release: () => void): StalledBodyWatch {
  let stopped = false;
  const timer = setTimeout(() => {
    stopped = true;
    release();
    body.destroy(describeBodyStall(stallMs));
  }, stallMs);
  // A server that closes does not wait for a stalled body's bound: its connections close anyway.
  timer.unref();
  return {
    // `refresh` would start a stopped timer again.
    arrived: () => {
      if (!stopped) timer.refresh();
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
    },
  };
}

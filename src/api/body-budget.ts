import type { IncomingMessage } from "node:http";
import { getHeapStatistics } from "node:v8";
import { AppError } from "../errors/app-error.ts";

/**
 * The request bodies held in memory at once, in bytes: a body is read whole, then parsed, and an
 * upstream request is built from it, two to three times its size in all while its request runs.
 * Each body fits `body_limit`, but nothing bounded how many ran together: 80 streamed requests of
 * 7.8 MB at once ran a 1 GB heap out of memory (the process died, every tenant with it), and a
 * key with no balance could hold 7.6 MB a connection for the 5-minute request timeout before its
 * 403. So a request with a body takes its declared size (a chunked one `body_limit`) from this
 * budget before its body is read, and gives it back when its response ends; one that does not
 * fit gets 503 `server_overloaded` with `retry-after`, its body never read.
 */
export class BodyBudget {
  readonly #limitBytes: number;
  #heldBytes = 0;

  constructor(limitBytes: number) {
    this.#limitBytes = limitBytes;
  }

  /** An eighth of the heap Node may grow to (a 4 GB heap: 512 MB of bodies), at least `bodyLimitBytes` twice. */
  static forHeap(bodyLimitBytes: number): BodyBudget {
    return new BodyBudget(Math.max(2 * bodyLimitBytes, Math.floor(getHeapStatistics().heap_size_limit / 8)));
  }

  /**
   * Takes the bytes `request` may bring (none for a request without a body) and returns the
   * function that gives them back, or refuses when they do not fit beside the bodies held now.
   */
  take(request: IncomingMessage, bodyLimitBytes: number): (() => void) | AppError {
    const bytes = bodyBytes(request, bodyLimitBytes);
    if (bytes === 0) return () => {};
    if (this.#heldBytes + bytes > this.#limitBytes) {
      return new AppError(
        "server_overloaded",
        "The server is holding as many request bodies as its memory allows. Please retry shortly.",
        { retryAfterSeconds: 1 },
      );
    }
    this.#heldBytes += bytes;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#heldBytes -= bytes;
    };
  }
}

/** What a request's body may hold: its `Content-Length` (at most the limit, which refuses more), else the limit when it is chunked. */
function bodyBytes(request: IncomingMessage, bodyLimitBytes: number): number {
  const length = request.headers["content-length"];
  if (length !== undefined) {
    const declared = Number(length);
    return Number.isFinite(declared) && declared > 0 ? Math.min(declared, bodyLimitBytes) : 0;
  }
  return request.headers["transfer-encoding"] === undefined ? 0 : bodyLimitBytes;
}

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
 *
 * Only a request whose key was accepted takes from it, and one holder (an account: all its keys)
 * at most a quarter of it (at least one body): connections that declare megabytes and send a byte
 * hold their share until the request timeout (5 minutes), and about 70 of them, without a key,
 * kept every tenant's requests with a body out for as long; now it takes a valid key, and the
 * keys of four accounts, to fill it.
 */
export class BodyBudget {
  readonly #limitBytes: number;
  readonly #shareBytes: number;
  #heldBytes = 0;
  /** Bytes held by each holder now (holders holding none are not kept). */
  readonly #heldBy = new Map<string, number>();

  constructor(limitBytes: number, options: { shareBytes?: number } = {}) {
    this.#limitBytes = limitBytes;
    this.#shareBytes = options.shareBytes ?? limitBytes;
  }

  /** An eighth of the heap Node may grow to (a 4 GB heap: 512 MB of bodies), at least `bodyLimitBytes` twice. */
  static forHeap(bodyLimitBytes: number): BodyBudget {
    return BodyBudget.sharedBy(
      Math.max(2 * bodyLimitBytes, Math.floor(getHeapStatistics().heap_size_limit / 8)),
      bodyLimitBytes,
    );
  }

  /** A budget of `limitBytes` whose holders may each take a quarter, and at least `bodyLimitBytes`. */
  static sharedBy(limitBytes: number, bodyLimitBytes: number): BodyBudget {
    return new BodyBudget(limitBytes, { shareBytes: Math.max(bodyLimitBytes, Math.floor(limitBytes / 4)) });
  }

  /**
   * Takes for `holder` the bytes `request` may bring and returns the function that gives them
   * back (`undefined` for a request without a body, most), or refuses when they do not fit beside
   * the bodies held now, or beside the holder's own.
   */
  take(
    request: IncomingMessage,
    bodyLimitBytes: number,
    holder: string,
  ): (() => void) | AppError | undefined {
    const bytes = bodyBytes(request, bodyLimitBytes);
    if (bytes === 0) return undefined;
    const holderBytes = this.#heldBy.get(holder) ?? 0;
    if (this.#heldBytes + bytes > this.#limitBytes || holderBytes + bytes > this.#shareBytes) {
      return new AppError(
        "server_overloaded",
        "The server is holding as many request bodies as its memory allows. Please retry shortly.",
        { retryAfterSeconds: 1 },
      );
    }
    this.#heldBytes += bytes;
    this.#heldBy.set(holder, holderBytes + bytes);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#heldBytes -= bytes;
      const left = (this.#heldBy.get(holder) ?? bytes) - bytes;
      if (left > 0) this.#heldBy.set(holder, left);
      else this.#heldBy.delete(holder);
    };
  }
}

/** Whether `request` brings a body: a `Content-Length` above 0, or a chunked one. */
export function carriesBody(request: IncomingMessage): boolean {
  return bodyBytes(request, 1) > 0;
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

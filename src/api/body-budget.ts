import type { IncomingMessage } from "node:http";
import { type Readable, Transform } from "node:stream";
import { getHeapStatistics } from "node:v8";
import { AppError } from "../errors/app-error.ts";
import { endStalledBody, type StalledBodyWatch } from "./end-stalled-body.ts";

/**
 * The request bodies held in memory at once, in bytes: a body is read whole, then parsed, and an
 * upstream request is built from it, two to three times its size in all while its request runs.
 * Each body fits `body_limit`, but nothing bounded how many ran together: 80 streamed requests of
 * 7.8 MB at once ran a 1 GB heap out of memory (the process died, every tenant with it).
 *
 * So a request takes from this budget the bytes of its body that have arrived, as they arrive,
 * and gives them back when its response ends (or its connection goes); one holder (an account:
 * all its keys) at most a quarter of it (at least one body), the last quarter kept for holders
 * of one body at most (see sharedBy). A piece that does not fit beside the
 * bodies held, all of them or its holder's, ends the request with 503 `server_overloaded` and
 * `retry-after`, its body dropped (and its connection closed, if more of it was coming). A
 * request's declared size (its `Content-Length`) is only looked at, once its key is accepted: a
 * body that could not fit now is refused before it is read (with `Expect: 100-continue`, before
 * it is asked for); one over `body_limit` is left to its 413, which no retry mends.
 *
 * Bytes, not declared sizes, are held: a declared size taken up front was held by a client that
 * declares megabytes and sends a byte now and then, and five accounts doing so kept every
 * tenant's bodies out for the request timeout (5 minutes) with next to nothing in memory; a
 * chunked body took `body_limit` whole, so 16 small uploads at once filled an account's share.
 * Now a client holds what it sent: to keep others out it must send (and the server hold) that
 * much, within its account's share. A body that does not fit is refused, not paused until room
 * frees: a paused body holds what it sent, and bodies paused halfway could hold the whole budget
 * between them, none able to finish, until the request timeout. A body that stops arriving is
 * ended (408) once none of it has come for `stallMs` (end-stalled-body.ts), its bytes given back
 * then: held to the request timeout, a few accounts' stalled bodies (or one account's, on many
 * connections) kept the budget full for minutes. A body that trickles is cut only by the request
 * timeout: it holds the few bytes it sent, and a bound on its pauses does not stop a client that
 * sends a byte just within it (it must keep sending, and the server holds only what it sent).
 *
 * Only a request whose key was accepted takes from it: about 70 connections without a key, each
 * declaring megabytes, kept every tenant's requests with a body out for as long.
 */
export class BodyBudget {
  readonly #limitBytes: number;
  readonly #shareBytes: number;
  readonly #reserveBytes: number;
  readonly #smallHoldBytes: number;
  readonly #stallMs: number;
  #heldBytes = 0;
  /** Bytes held by each holder now (holders holding none are not kept). */
  readonly #heldBy = new Map<string, number>();
  /** The requests holding a part of it, by the key that sent them (see cutBodiesOf). */
  readonly #requestsBy = new Map<string, Set<IncomingMessage>>();

  /**
   * `shareBytes`: the most one holder may hold, default all of it. `reserveBytes`: the last part of
   * the budget, kept for holders that hold at most `smallHoldBytes` (one body) with the piece
   * taken; default none. `stallMs`: the longest a body being read may go without a byte arriving
   * before it is ended with 408; default (or 0): no bound but the request timeout.
   */
  constructor(
    limitBytes: number,
    options: { shareBytes?: number; reserveBytes?: number; smallHoldBytes?: number; stallMs?: number } = {},
  ) {
    this.#limitBytes = limitBytes;
    this.#shareBytes = options.shareBytes ?? limitBytes;
    this.#reserveBytes = options.reserveBytes ?? 0;
    this.#smallHoldBytes = options.smallHoldBytes ?? limitBytes;
    this.#stallMs = options.stallMs ?? 0;
  }

  /** An eighth of the heap Node may grow to (a 4 GB heap: 512 MB of bodies), at least `bodyLimitBytes` twice. */
  static forHeap(bodyLimitBytes: number, options: { stallMs?: number } = {}): BodyBudget {
    return BodyBudget.sharedBy(
      Math.max(2 * bodyLimitBytes, Math.floor(getHeapStatistics().heap_size_limit / 8)),
      bodyLimitBytes,
      options,
    );
  }

  /**
   * A budget of `limitBytes` whose holders may each take a quarter, and at least `bodyLimitBytes`;
   * its last quarter is kept for holders of one body at most. Four accounts, each holding its
   * share with bodies sent but for their last bytes (one byte every 20 s after), kept every other
   * tenant's requests out (503) for minutes at no cost; now it takes them the other three
   * quarters, and as many more accounts again as one body each fits in the last.
   */
  static sharedBy(
    limitBytes: number,
    bodyLimitBytes: number,
    options: { stallMs?: number } = {},
  ): BodyBudget {
    return new BodyBudget(limitBytes, {
      shareBytes: Math.max(bodyLimitBytes, Math.floor(limitBytes / 4)),
      reserveBytes: Math.max(0, Math.min(Math.floor(limitBytes / 4), limitBytes - 2 * bodyLimitBytes)),
      smallHoldBytes: bodyLimitBytes,
      ...options,
    });
  }

  /**
   * Admits `request` for `holder`: the hold its body's bytes are taken into as they come
   * (`undefined` for a request without a body, most), or the refusal of a body whose declared
   * size does not fit beside the bodies held now, or beside the holder's own.
   */
  admit(
    request: IncomingMessage,
    bodyLimitBytes: number,
    holder: string,
    /** The key that sent it, whose revocation cuts its body if still coming (see cutBodiesOf). */
    sender?: string,
  ): BodyHold | AppError | undefined {
    const declared = declaredBytes(request);
    // A body over the limit is refused (413: no retry helps) before it is read: it holds nothing.
    if (declared === 0 || declared > bodyLimitBytes) return undefined;
    if (!this.#fits(holder, declared)) return overloaded();
    const hold = this.#hold(holder, bodyLimitBytes, Number(request.headers["content-length"]));
    if (sender === undefined) return hold;
    const requests = this.#requestsBy.get(sender) ?? new Set();
    requests.add(request);
    this.#requestsBy.set(sender, requests);
    return {
      count: hold.count,
      giveBack: () => {
        hold.giveBack();
        requests.delete(request);
        if (requests.size === 0 && this.#requestsBy.get(sender) === requests) this.#requestsBy.delete(sender);
      },
    };
  }

  /**
   * Cuts the bodies `sender` (a key that no longer works) is still sending: their connections
   * close, and the bytes they held are given back. Requests whose bodies are in whole run on.
   */
  cutBodiesOf(sender: string): void {
    for (const request of this.#requestsBy.get(sender) ?? []) if (!request.complete) request.destroy();
  }

  #fits(holder: string, bytes: number): boolean {
    const holding = (this.#heldBy.get(holder) ?? 0) + bytes;
    const limit = holding <= this.#smallHoldBytes ? this.#limitBytes : this.#limitBytes - this.#reserveBytes;
    return this.#heldBytes + bytes <= limit && holding <= this.#shareBytes;
  }

  /** `length`: the body's `Content-Length`, `NaN` for a chunked one. */
  #hold(holder: string, bodyLimitBytes: number, length: number): BodyHold {
    let held = 0;
    let given = false;
    let watch: StalledBodyWatch | undefined;
    const take = (bytes: number): boolean => {
      // Bytes that come once the response is over are dropped, not held; and a body over the
      // limit is refused by its reader (413: no retry helps), which holds none of it.
      if (given || bytes === 0 || held + bytes > bodyLimitBytes) return true;
      if (!this.#fits(holder, bytes)) return false;
      this.#heldBytes += bytes;
      this.#heldBy.set(holder, (this.#heldBy.get(holder) ?? 0) + bytes);
      held += bytes;
      return true;
    };
    const giveBack = (): void => {
      watch?.stop();
      if (given) return;
      given = true;
      if (held === 0) return;
      this.#heldBytes -= held;
      const left = (this.#heldBy.get(holder) ?? held) - held;
      if (left > 0) this.#heldBy.set(holder, left);
      else this.#heldBy.delete(holder);
    };
    return {
      count: (payload) => {
        // Most bodies are in whole once the key is accepted, buffered in the request (which Node
        // marks complete only a moment later): taken at once, with no stream to count them.
        if (payload.readableLength === length || payload.complete === true)
          return take(payload.readableLength) ? payload : overloaded();
        const counted = countAsItComes(payload, take, () => watch?.arrived());
        if (this.#stallMs > 0 && !given) {
          const watching = endStalledBody(counted, this.#stallMs, giveBack);
          watch = watching;
          payload.once("end", watching.stop);
          counted.once("close", watching.stop);
        }
        return counted;
      },
      giveBack,
    };
  }
}

/** A request body as Fastify hands it on: the request itself, `complete` once its body is in whole. */
export type BodyPayload = Readable & { complete?: boolean };

/** One admitted request's part of a {@link BodyBudget}: the bytes of its body received so far. */
export interface BodyHold {
  /**
   * What to read the request's body from: `payload` itself when the body is in whole already,
   * taken at once; else a stream of it that takes each piece as it comes and fails with the
   * refusal when one does not fit (or with a 408 when the body stops arriving); or the refusal.
   */
  count(payload: BodyPayload): Readable | AppError;
  /**
   * Gives back what the request holds, and stops watching its body's pauses; once, for good:
   * pieces that come later are not taken.
   */
  giveBack(): void;
}

/**
 * Small pieces are joined up to this many bytes before they go on: the body parser keeps every
 * piece it reads as a Buffer of its own until the body is whole, a few hundred bytes of heap
 * each, so a body sent in chunks of one byte held a hundred times its size (7 MB of it ran a
 * 1 GB heap out of memory) where the budget counted its bytes.
 */
const JOINED_BYTES = 64 * 1024;
/**
 * Past this many pieces, a body whose pieces average fewer than {@link MIN_AVERAGE_PIECE_BYTES}
 * is refused: each piece costs the event loop the same whatever its size, and a body of
 * one-byte chunks took 34 s of CPU for 7 MB (0.1 s with a Content-Length), another tenant's
 * requests waiting 170 ms each meanwhile. Clients send kilobytes a chunk.
 */
const PIECES_BEFORE_AVERAGE = 4096;
const MIN_AVERAGE_PIECE_BYTES = 64;

/**
 * `payload` passed on as it comes, each piece told as `arrived`, then taken; small pieces joined
 * (see {@link JOINED_BYTES}), and a body of many tiny ones refused (see
 * {@link PIECES_BEFORE_AVERAGE}). A piece no one reads (a route that takes no body, or one
 * refused as it came: 413) is dropped, not held nor pushed on, so the rest of the body drains
 * and the connection can serve its next request.
 */
function countAsItComes(payload: Readable, take: (bytes: number) => boolean, arrived: () => void): Transform {
  let pieces = 0;
  let bytes = 0;
  let joined: Buffer[] = [];
  let joinedBytes = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      arrived();
      if (this.listenerCount("data") === 0) return callback();
      pieces++;
      bytes += chunk.length;
      if (pieces > PIECES_BEFORE_AVERAGE && bytes < pieces * MIN_AVERAGE_PIECE_BYTES)
        return callback(sentInTinyPieces(pieces, bytes));
      if (!take(chunk.length)) return callback(overloaded());
      if (joined.length === 0 && chunk.length >= JOINED_BYTES) return callback(null, chunk);
      joined.push(chunk);
      joinedBytes += chunk.length;
      if (joinedBytes < JOINED_BYTES) return callback();
      const piece = Buffer.concat(joined, joinedBytes);
      joined = [];
      joinedBytes = 0;
      callback(null, piece);
    },
    flush(callback) {
      callback(null, joined.length === 0 ? undefined : Buffer.concat(joined, joinedBytes));
    },
  });
  // The refusal goes to the reader; with none left (it stopped reading), it goes nowhere.
  counted.on("error", ignore);
  // A connection that closes mid-body ends the reading as it did without this stream.
  payload.once("error", (error) => counted.destroy(error));
  payload.pipe(counted);
  return counted;
}

function ignore(): void {}

function sentInTinyPieces(pieces: number, bytes: number): AppError {
  return new AppError(
    "invalid_http_request",
    `The request body came in ${pieces} pieces of ${Math.floor(bytes / pieces)} bytes on average so far; send it in chunks of at least ${MIN_AVERAGE_PIECE_BYTES} bytes (a client's chunks are kilobytes), or with a Content-Length.`,
  );
}

function overloaded(): AppError {
  return new AppError(
    "server_overloaded",
    "The server is holding as many request bodies as its memory allows. Please retry shortly.",
    { retryAfterSeconds: 1 },
  );
}

/**
 * The `preParsing` hook that reads a request's body through its hold (`request.bodyHold`, set
 * once its key is accepted): a body that does not fit is refused here, when it is in whole
 * already, or as it comes (one that stops arriving is ended too), and then Fastify closes the
 * connection, dropping the rest.
 */
export function countHeldBody(
  request: { bodyHold: BodyHold | null },
  _reply: unknown,
  payload: BodyPayload,
  done: (error: Error | null, payload?: Readable) => void,
): void {
  const hold = request.bodyHold;
  if (hold === null) {
    done(null, payload);
    return;
  }
  const counted = hold.count(payload);
  if (counted instanceof AppError) done(counted);
  else done(null, counted);
}

/** Whether `request` brings a body: a `Content-Length` above 0, or a chunked one. */
export function carriesBody(request: IncomingMessage): boolean {
  return declaredBytes(request) > 0;
}

/**
 * What a request's body says it brings: its `Content-Length`, 1 when it is chunked (its size is
 * known once it ends: a byte at least must fit), 0 without a body.
 */
function declaredBytes(request: IncomingMessage): number {
  const length = request.headers["content-length"];
  if (length !== undefined) {
    const declared = Number(length);
    return Number.isFinite(declared) && declared > 0 ? declared : 0;
  }
  return request.headers["transfer-encoding"] === undefined ? 0 : 1;
}

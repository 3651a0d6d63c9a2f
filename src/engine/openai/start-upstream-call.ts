import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher, Pool } from "undici";
import type { ConnectionSlots } from "./connection-slots.ts";
import type { ConnectionAwareHandler, UpstreamConnection } from "./create-upstream-pool.ts";
import { isConnectionClosed } from "./describe-transport-error.ts";

/** One HTTP exchange with an upstream, read by pulling. */
export interface UpstreamCall {
  /** The status and headers; rejects with the transport error, or the reason it was aborted. */
  readonly response: Promise<{ statusCode: number; headers: IncomingHttpHeaders }>;
  /**
   * The next piece of the body as text (UTF-8 decoded across chunk boundaries, a leading byte
   * order mark dropped), or `undefined`
   * once the body ended. Rejects with the transport error, or the reason it was aborted, after
   * the pieces that came before it.
   */
  read(): Promise<string | undefined>;
  /**
   * Stops the exchange (closing its connection) and makes pending and later reads reject; false
   * when it had already ended or failed.
   */
  abort(reason: Error): boolean;
  /**
   * The reader wants nothing more: the rest of the body is read and dropped, so that the
   * connection can be reused, unless it has not ended within `timeoutMs` (then the exchange is
   * aborted). Reads after this find the body ended.
   */
  drain(timeoutMs: number): void;
  /**
   * Whether the exchange failed as a kept-alive connection does when the upstream closes it, its
   * idle timeout run out, just as the request goes out on it: the connection closed or reset,
   * nothing of an answer come on it, it had served an earlier request (on a new connection
   * this is an upstream that is down or drops requests), and the close came at once
   * ({@link IDLE_CLOSE_WINDOW_MS}). Such a failure says nothing of the
   * upstream's health, and the request may be sent again at once, as browsers and undici's own
   * retries do for requests that may be repeated.
   */
  closedWhileIdle(): boolean;
}

/**
 * How soon after its request went out a kept-alive connection's close counts as the upstream's
 * idle timeout (see UpstreamCall.closedWhileIdle): that close is on its way as the request is
 * written, and comes within a round trip. One that comes later is the upstream dropping a request
 * it took (a crash, an overload): sent again, it could do the same to the upstream twice more.
 */
const IDLE_CLOSE_WINDOW_MS = 1000;

/**
 * Characters of the body held for a reader that does not take them (a slow or stalled client)
 * before the upstream is paused (TCP backpressure); it resumes once the reader has taken them
 * down to half. Counted in characters, not pieces: a piece is whatever one socket read brought,
 * from a few bytes to 64 KiB, and 32 pieces held anything up to 2 MiB of text (4 MiB as UTF-16)
 * per stream, depending on how the upstream's bytes happened to arrive. A character comes from
 * at least one byte of the body and takes at most two bytes of memory: one stream holds at most
 * this and the piece that crossed it (at most one socket read), 256 KiB in all, besides what the
 * socket and the kernel buffer. A reader that keeps up never comes near it: a whole answer is
 * most often one small read, and a token stream's pieces are taken one by one as they come.
 */
const HIGH_WATER_MARK = 64 * 1024;
/**
 * Pieces held before the upstream is paused, whatever their length: each costs a string and an
 * array slot (some 40 bytes) however short, and an upstream that sends its body a byte at a
 * time must not hold 64 Ki of them.
 */
const MAX_PIECES_HELD = 1024;
/** One options object for every piece decoded: more may follow. */
const MORE_TO_COME = { stream: true };

/**
 * Sends a POST through undici's dispatcher, turning its callbacks into a pull interface. This
 * costs less per request than `request()`, which wraps the body in a Readable stream and an
 * AbortSignal. For stall watching, `onWaiting` tells whether the reader waits for the next piece
 * (`true`) or has taken one (`false`); what counts as the upstream's activity is the reader's to
 * say.
 */
export function startUpstreamCall(options: {
  pool: Pool;
  path: string;
  headers: Record<string, string>;
  body: string;
  onWaiting: (waiting: boolean) => void;
  /**
   * The request is being written on a connection: it has left the pool's queue (`max_connections`)
   * and any connect. Waiting there is Tollgate's, not the upstream's.
   */
  onStarted?: () => void;
  /** The endpoint's `max_connections`, when it has one: the request waits here for a slot. */
  slots?: ConnectionSlots | undefined;
  /** Whom the request is for, where it waits for a slot (ConnectionSlots.acquire). */
  tenant?: string | undefined;
}): UpstreamCall {
  let controller: Dispatcher.DispatchController | undefined;
  let resolveResponse: (value: { statusCode: number; headers: IncomingHttpHeaders }) => void = () => {};
  let rejectResponse: (error: Error) => void = () => {};
  const response = new Promise<{ statusCode: number; headers: IncomingHttpHeaders }>((resolve, reject) => {
    resolveResponse = resolve;
    rejectResponse = reject;
  });
  // Read or not, a failed exchange must not become an unhandled rejection.
  response.catch(() => {});
  const pieces: string[] = [];
  /** The characters in `pieces`. */
  let held = 0;
  // The standard's UTF-8 decode, which drops one byte order mark at the start of the body (even
  // split over pieces): an event stream's first line after a BOM would be a field nobody knows.
  const decoder = new TextDecoder("utf-8");
  let ended = false;
  let draining = false;
  let drainTimer: NodeJS.Timeout | undefined;
  let failure: Error | undefined;
  /** Set when the request goes out (create-upstream-pool.ts), with when that was. */
  let connection: UpstreamConnection | undefined;
  let sentAt = 0;
  let failedAt = 0;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  /** Leaves the line for a slot, or gives back the slot held: once the exchange is over. */
  let withdraw: (() => void) | undefined;
  let releaseSlot: (() => void) | undefined;
  const letGo = () => {
    withdraw?.();
    withdraw = undefined;
    const release = releaseSlot;
    releaseSlot = undefined;
    release?.();
  };
  const fail = (error: Error) => {
    if (failure !== undefined || ended) return;
    letGo();
    failure = error;
    failedAt = performance.now();
    clearTimeout(drainTimer);
    rejectResponse(error);
    notify();
  };

  const handler: ConnectionAwareHandler = {
    onConnection(used) {
      connection = used;
      sentAt = performance.now();
    },
    onRequestStart(started) {
      controller = started;
      if (failure !== undefined) started.abort(failure);
      else options.onStarted?.();
    },
    onResponseStart(_controller, statusCode, headers) {
      // An informational answer (102 Processing, 103 Early Hints) comes before the real one, which
      // follows on the same request (RFC 9110 section 15.2): it is no answer.
      if (statusCode < 200) return;
      resolveResponse({ statusCode, headers });
    },
    onResponseData(current, chunk) {
      if (failure !== undefined || draining) return;
      const piece = decoder.decode(chunk, MORE_TO_COME);
      pieces.push(piece);
      held += piece.length;
      if (held >= HIGH_WATER_MARK || pieces.length >= MAX_PIECES_HELD) current.pause();
      notify();
    },
    onResponseEnd() {
      letGo();
      if (failure !== undefined) return;
      clearTimeout(drainTimer);
      const rest = decoder.decode();
      if (rest !== "" && !draining) {
        pieces.push(rest);
        held += rest.length;
      }
      ended = true;
      notify();
    },
    onResponseError(_controller, error) {
      fail(error);
    },
  };

  const abort = (reason: Error): boolean => {
    if (failure !== undefined || ended) return false;
    pieces.length = 0;
    held = 0;
    fail(reason);
    controller?.abort(reason);
    return true;
  };

  const dispatch = () => {
    try {
      options.pool.dispatch(
        { method: "POST", path: options.path, headers: options.headers, body: options.body },
        handler,
      );
    } catch (error) {
      fail(error instanceof Error ? error : new Error(String(error)));
    }
  };
  const { slots } = options;
  if (slots === undefined) dispatch();
  else
    withdraw = slots.acquire(() => {
      withdraw = undefined;
      releaseSlot = () => slots.release(options.tenant);
      // Given up while it waited (the slot's grant came in the same turn as the abort): no send.
      if (failure !== undefined) letGo();
      else dispatch();
    }, options.tenant);

  return {
    response,
    async read() {
      for (;;) {
        const piece = pieces.shift();
        if (piece !== undefined) {
          options.onWaiting(false);
          held -= piece.length;
          if (
            controller?.paused === true &&
            held <= HIGH_WATER_MARK / 2 &&
            pieces.length <= MAX_PIECES_HELD / 2
          )
            controller.resume();
          return piece;
        }
        if (failure !== undefined) throw failure;
        if (ended || draining) return undefined;
        options.onWaiting(true);
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
    abort,
    drain(timeoutMs) {
      pieces.length = 0;
      held = 0;
      if (failure !== undefined || ended || draining) return;
      draining = true;
      if (controller?.paused === true) controller.resume();
      drainTimer = setTimeout(() => abort(new Error("the body did not end")), timeoutMs);
      drainTimer.unref();
    },
    closedWhileIdle() {
      return (
        failure !== undefined &&
        connection?.reused === true &&
        !connection.heardSince() &&
        failedAt - sentAt < IDLE_CLOSE_WINDOW_MS &&
        isConnectionClosed(failure)
      );
    },
  };
}

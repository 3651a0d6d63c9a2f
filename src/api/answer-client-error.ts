import { type IncomingMessage, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { AppError } from "../errors/app-error.ts";
import { createRequestId } from "./create-request-id.ts";
import { toWireError } from "./errors.ts";

/** What Node's HTTP server tells about a connection it could not read a request from. */
interface ClientError extends Error {
  code?: string;
  /** llhttp's description of a parse error, e.g. "Invalid method encountered". */
  reason?: string;
}

/**
 * The response Node may be writing on the socket (a raw answer must not cut into its bytes), and
 * the parser with the request whose headers it read last.
 */
interface HttpSocket extends Duplex {
  /** Emits `close` once it is done with (finished, or cut). */
  _httpMessage?: ({ headersSent?: boolean } & Pick<NodeJS.EventEmitter, "once">) | null;
  parser?: { incoming?: IncomingMessage | null } | null;
}

/** The bounds Node puts on a client's sending of a request, as the server is configured. */
export interface RequestTimeouts {
  /** Longest time, in ms, from a request's first byte to the end of its headers; 0: none. */
  headersTimeoutMs: number;
  /** Longest time, in ms, from a request's first byte to the end of its body; 0: none. */
  requestTimeoutMs: number;
}

/**
 * The error for a request the HTTP parser refused or that never arrived in full, in the
 * contract's shape like every other answer (Node and Fastify would answer in their own).
 */
export function describeClientError(
  error: ClientError,
  timeouts: RequestTimeouts,
  headersReceived: boolean,
): AppError {
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    // Node reports both bounds with this one code: the headers bound (never the looser one) is
    // what fired if the headers are not in yet, the whole request's otherwise.
    if (!headersReceived && timeouts.headersTimeoutMs > 0)
      return new AppError(
        "request_timeout",
        `The request's headers did not arrive in full within ${timeouts.headersTimeoutMs / 1000} seconds; send them without long pauses.`,
      );
    return new AppError(
      "request_timeout",
      `The request did not arrive in full within ${timeouts.requestTimeoutMs / 1000} seconds of its start; send its body without long pauses.`,
    );
  }
  if (error.code === "HPE_HEADER_OVERFLOW")
    return new AppError(
      "headers_too_large",
      "The request's headers are larger than this server accepts (16 KiB in all); send fewer or shorter headers.",
    );
  const reason = typeof error.reason === "string" && error.reason !== "" ? ` (${error.reason})` : "";
  return new AppError("invalid_http_request", `The request is not valid HTTP/1.1${reason}.`);
}

/**
 * The 408 for a request whose body stopped arriving: none of it came for `stallMs` (see
 * end-stalled-body.ts). The request timeout's answer names a bound from the request's start;
 * this one names the pause, which a client that keeps sending never reaches.
 */
export function describeBodyStall(stallMs: number): AppError {
  return new AppError(
    "request_timeout",
    `The request's body stopped arriving: none of it came for ${stallMs / 1000} seconds; send it without long pauses.`,
  );
}

/**
 * Node's `clientError` handler: answers in the contract's error shape, then closes the
 * connection. Nothing is written once a response has started on the socket (a pipelined
 * request's error would corrupt it), nor to a connection the client already reset. Returns the
 * error answered to a request that reached no route (the parser refused it, or its headers never
 * came in full), which no other hook records, with the request id its answer carries; `undefined`
 * otherwise.
 */
export function answerClientError(
  error: ClientError,
  socket: HttpSocket,
  timeouts: RequestTimeouts,
): { error: AppError; requestId: string } | undefined {
  if (error.code === "ECONNRESET" || socket.destroyed || answering.has(socket)) return undefined;
  // The parser keeps the last request whose headers it read, complete once its body is in too.
  const incoming = socket.parser?.incoming;
  // Whole requests wait for their answers, and the parser refused what came after them (a broken
  // client's next request, anything after `Connection: close`): they are answered first, then
  // this, as RFC 9112 (section 9.6) has a server answer before it closes. Closing at once cut
  // them, charged as left by their clients, who got only this error.
  if (
    socket._httpMessage != null &&
    incoming?.complete === true &&
    socket.writable &&
    !draining.has(socket)
  ) {
    const appError = describeClientError(error, timeouts, false);
    const requestId = createRequestId();
    answering.add(socket);
    afterResponses(socket, () => writeErrorAndClose(socket, appError, requestId));
    return { error: appError, requestId };
  }
  // The request was answered already (early, its body still unread): a second answer would
  // reach the client as the response to a request it never sent.
  if (!socket.writable || socket._httpMessage?.headersSent === true || draining.has(socket)) {
    socket.destroy();
    return undefined;
  }
  // Its headers were read and its body was coming (else the parser holds a request of the
  // connection answered before, or none).
  const bodyComing = incoming != null && !incoming.complete;
  const appError = describeClientError(error, timeouts, bodyComing);
  // A request already routed (its body was coming) is recorded with this answer, not as left;
  // unless its client ended the connection mid-request (it is gone: the answer reaches no one).
  if (incoming != null && error.code !== CLIENT_ENDED_MID_REQUEST)
    refusedByClientError.set(incoming, appError);
  const requestId = writeErrorAndClose(socket, appError);
  // Such a request the server records (with this answer, or as left); the others no one does.
  return bodyComing ? undefined : { error: appError, requestId };
}

/** Connections whose refused bytes are answered once the requests before them are. */
const answering = new WeakSet<Duplex>();

/**
 * Runs `then` once the socket has no response under way (Node gives it the next pipelined
 * request's as one ends), unless the connection ended meanwhile (`Connection: close`, a client
 * that left).
 */
function afterResponses(socket: HttpSocket, then: () => void): void {
  const response = socket._httpMessage;
  if (response == null) {
    if (socket.writable && !socket.destroyed) then();
    return;
  }
  response.once("close", () => setImmediate(() => afterResponses(socket, then)));
}

/** llhttp's error for a connection its client ended before the request was complete. */
const CLIENT_ENDED_MID_REQUEST = "HPE_INVALID_EOF_STATE";

/**
 * Requests whose headers were read, answered here on the socket (408 while their body came): the
 * server records them with this answer when their connection closes, not as clients that left.
 */
export const refusedByClientError = new WeakMap<IncomingMessage, AppError>();

/**
 * Node's `connect` handler: a `CONNECT` request (a client taking the server for a proxy) is
 * refused in the contract's shape. Without a handler Node closes such a connection with no
 * answer at all.
 */
export function refuseConnect(socket: Duplex): void {
  writeErrorAndClose(
    socket,
    new AppError(
      "invalid_http_request",
      "CONNECT is not supported: this server is not a proxy. Send the request to it directly (e.g. POST /v1/chat/completions).",
    ),
  );
}

/** Writes `appError` as a whole response on `socket`, which is then closed; answers its request id. */
function writeErrorAndClose(socket: Duplex, appError: AppError, requestId = createRequestId()): string {
  const body = JSON.stringify(toWireError(appError));
  const head = [
    `HTTP/1.1 ${appError.status} ${STATUS_CODES[appError.status] ?? "Error"}`,
    "content-type: application/json; charset=utf-8",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
    // Every response has one (SPEC §4); a request that could not be read has no id of its own.
    `x-request-id: ${requestId}`,
  ].join("\r\n");
  socket.end(`${head}\r\n\r\n${body}`, () => socket.destroy());
  // A client that reads nothing must not hold the socket open.
  setTimeout(() => socket.destroy(), 5_000).unref();
  return requestId;
}

/** Connections reading and dropping the rest of a body whose request was answered early. */
const draining = new WeakSet<Duplex>();

/**
 * Bounds the rest of a request body that an early answer left unread (a refused key, a body over
 * the limit). Node then reads and drops it to reach the connection's next request, for as long
 * as the client takes to send it, a byte at a time if it likes: the request timeout stops
 * covering a request once its answer is out. The connection is closed if the body has not ended
 * by the time that timeout, counted from the request's start, would have passed; or, with
 * `stallMs`, once none of it has arrived for that long: its answer is out, and a client that
 * stopped sending would only hold the socket (see end-stalled-body.ts).
 */
export function boundUnreadBody(request: IncomingMessage, remainingMs: number, stallMs = 0): void {
  if (request.complete) return;
  const socket = request.socket;
  draining.add(socket);
  const close = () => socket.destroy();
  const timer = setTimeout(close, Math.max(0, remainingMs));
  timer.unref();
  const stall = stallMs > 0 && stallMs < remainingMs ? watchForStall(socket, stallMs, close) : undefined;
  // The listeners go once any fires: a keep-alive socket may see many such requests.
  const clear = () => {
    clearTimeout(timer);
    clearInterval(stall);
    draining.delete(socket);
    request.off("end", clear);
    socket.off("close", clear);
  };
  request.once("end", clear);
  socket.once("close", clear);
}

/** How many times per stall bound {@link watchForStall} looks at the socket. */
const STALL_CHECKS = 8;

/**
 * Calls `close` once nothing has come on `socket` for `stallMs` (within an eighth of it). Node
 * drops a body whose request was answered without telling anyone (no `data` event: a stall timer
 * refreshed by them cut a steady upload 30 s after the answer, and its client, which reads only
 * once it has sent all, lost the answer): the socket's count of bytes read tells.
 */
function watchForStall(socket: Duplex & { bytesRead?: number }, stallMs: number, close: () => void) {
  let read = socket.bytesRead;
  let quietSince = performance.now();
  const timer = setInterval(
    () => {
      const now = performance.now();
      if (socket.bytesRead !== read) {
        read = socket.bytesRead;
        quietSince = now;
      } else if (now - quietSince >= stallMs) close();
    },
    Math.max(1, Math.ceil(stallMs / STALL_CHECKS)),
  );
  timer.unref();
  return timer;
}

/**
 * Closes the connection of a request answered before its body came (a 413, a refused key), where
 * it closes after the answer, the way RFC 9112 (section 9.6) asks: its half first, then, once the
 * rest of the body came (or {@link boundUnreadBody} gave up on it), the whole. Node's close after
 * an answer to a client that asked for one (`Connection: close`, HTTP/1.0) destroyed the socket
 * with the body still coming, and the reset that the rest of it met lost the client its answer
 * (Python's http.client: BrokenPipeError, every time). A connection that stays open is left as
 * it is.
 */
export function closeAfterUnreadBody(request: IncomingMessage): void {
  if (request.complete) return;
  const socket = request.socket;
  const destroySoon = socket.destroySoon;
  // What Node calls once the answer is out, where the connection does not stay open.
  socket.destroySoon = () => {
    if (request.complete) return destroySoon.call(socket);
    socket.end();
  };
  request.once("end", () => {
    if (socket.writableEnded) socket.destroy();
  });
}

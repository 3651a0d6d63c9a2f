import type { IncomingMessage, ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import { AppError } from "../errors/app-error.ts";
import { bodyTooLarge } from "./errors.ts";

/** Requests whose `Expect` header Node could not meet, handed to Fastify to be refused there. */
const unmetExpectations = new WeakSet<IncomingMessage>();
/** Requests with `Expect: 100-continue` not told to send their body yet (see {@link sendContinue}). */
const awaitingContinue = new WeakMap<IncomingMessage, ServerResponse>();

/**
 * Lets requests with an `Expect` other than `100-continue` reach the app, to be refused by
 * {@link refuseRequestHead} in the contract's shape; Node would answer a bare 417 itself.
 * And holds back the `100 Continue` that Node would send at once for `Expect: 100-continue` until
 * the request's head is checked ({@link sendContinue}): a body over `body_limit` was asked for,
 * then refused with 413 while it came (curl sends this header with every body over 1 KB).
 * Costs nothing to other requests: Node emits these events for such requests only. The 100 goes
 * once every check of the head has passed (the key's too), just before the body is read.
 */
export function forwardExpectations(app: FastifyInstance, bodyLimitBytes: number): void {
  const server = app.server;
  app.addHook("preParsing", (request, _reply, payload, done) => {
    // Refused (413) without the body, after the key's check (SPEC section 11), the connection
    // then closed (see awaitsContinue).
    if (awaitingContinue.has(request.raw) && Number(request.headers["content-length"]) > bodyLimitBytes) {
      done(bodyTooLarge(bodyLimitBytes));
      return;
    }
    if (request.headers.expect !== undefined) sendContinue(request.raw);
    done(null, payload);
  });
  server.on("checkExpectation", (request: IncomingMessage, response) => {
    unmetExpectations.add(request);
    server.emit("request", request, response);
  });
  server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => {
    awaitingContinue.set(request, response);
    server.emit("request", request, response);
  });
}

/**
 * Tells a client that waits with `Expect: 100-continue` to send its body, once the request's
 * head is accepted (its key too); nothing for other requests. A request refused before (413, a
 * wrong key, the drain, the body budget, a path no route serves) is answered without it, and its
 * connection closes with the answer: the client sends no body then, so none is waited for.
 */
function sendContinue(request: IncomingMessage): void {
  const response = awaitingContinue.get(request);
  if (response === undefined) return;
  awaitingContinue.delete(request);
  response.writeContinue();
}

/** Whether the request still waits for `100 Continue`: its body was never asked for. */
export function awaitsContinue(request: IncomingMessage): boolean {
  return awaitingContinue.has(request);
}

/** Why a request's head is refused, and whether its connection is closed after the answer. */
export interface HeadRefusal {
  error: AppError;
  /** Node closes after a missing `Host`, not after an unmet `Expect` (the body is read and dropped). */
  closeConnection: boolean;
}

/**
 * The refusal of a request whose head Node would have refused itself, in a bare answer of its
 * own: an HTTP/1.1 request without `Host` (the server is built with `requireHostHeader: false`;
 * HTTP/1.0 has no such header and is let through, as Node does), or one whose `Expect` cannot be
 * met (see {@link forwardExpectations}). `undefined` for every other request. The caller looks
 * first whether `Host` is missing or `Expect` present, which costs the common request no call.
 */
export function refuseRequestHead(request: IncomingMessage): HeadRefusal | undefined {
  if (unmetExpectations.has(request)) {
    const error = new AppError(
      "invalid_http_request",
      `The request's 'Expect: ${String(request.headers.expect).slice(0, 64)}' cannot be met: this server knows only 'Expect: 100-continue'; remove the header.`,
    );
    return { error, closeConnection: false };
  }
  if (
    request.headers.host === undefined &&
    request.httpVersionMajor === 1 &&
    request.httpVersionMinor === 1
  ) {
    const error = new AppError(
      "invalid_http_request",
      "The request has no Host header, which HTTP/1.1 requires; send one (the server's name and port, e.g. 'Host: localhost:8080').",
    );
    return { error, closeConnection: true };
  }
  return undefined;
}

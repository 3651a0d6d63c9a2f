import type { IncomingMessage, Server } from "node:http";
import { AppError } from "../errors/app-error.ts";

/** Requests whose `Expect` header Node could not meet, handed to Fastify to be refused there. */
const unmetExpectations = new WeakSet<IncomingMessage>();

/**
 * Lets requests with an `Expect` other than `100-continue` reach the app, to be refused by
 * {@link refuseRequestHead} in the contract's shape; Node would answer a bare 417 itself.
 * Costs nothing to other requests: Node emits `checkExpectation` for these only.
 */
export function forwardUnmetExpectations(server: Server): void {
  server.on("checkExpectation", (request: IncomingMessage, response) => {
    unmetExpectations.add(request);
    server.emit("request", request, response);
  });
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
 * met (see {@link forwardUnmetExpectations}). `undefined` for every other request. The
 * caller looks first whether `Host` is missing or `Expect` present, which costs the common
 * request no call.
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

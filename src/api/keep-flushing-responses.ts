import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { normalizeRequestTarget } from "./normalize-request-target.ts";
import { CHAT_COMPLETIONS_PATH } from "./routes/chat-completions.ts";
import { unsentBytes } from "./write-event-stream.ts";

/**
 * Keeps `server.closeIdleConnections()` (which `server.close()`, and so a drain's `app.close()`,
 * calls) from destroying a connection whose response has ended but is still being sent: Node
 * counts a response done once `end()` is called, so at a drain's start a whole answer of
 * megabytes to a slow client was cut short, its bytes still in the socket's buffer, though
 * charged in full (found by a slow-consumer review). Such a connection closes once its response
 * is sent (the drain's shortened keep-alive), or at the drain's last pass (closeAllConnections),
 * which the drain logs for each answer it cuts so (`sending`): it was charged in full.
 */
export function keepFlushingResponses(server: Server): FlushingResponses {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  const closeIdleConnections = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    // Node leaves a connection alone while its response is not `finished`: said of those still
    // sending for as long as it looks.
    const sending: { finished: boolean }[] = [];
    for (const socket of sockets) {
      const response = responseOf(socket);
      if (response == null || response.writableFinished || !response.writableEnded) continue;
      const flags = response as unknown as { finished: boolean };
      if (!flags.finished) continue;
      flags.finished = false;
      sending.push(flags);
    }
    try {
      closeIdleConnections();
    } finally {
      for (const flags of sending) flags.finished = true;
    }
  };
  return {
    sending() {
      return [...sockets].flatMap((socket) => {
        const response = responseOf(socket);
        if (response == null || response.writableFinished || !response.headersSent) return [];
        if (!isChatCompletion(response.req)) return [];
        // Not `writableLength`, which counts a write the kernel has taken most of in full.
        return [{ requestId: readSentRequestId(response), unsentBytes: unsentBytes(socket) }];
      });
    },
  };
}

/** The chat answers being sent: begun (their head sent) and not yet sent whole. */
export interface FlushingResponses {
  /**
   * Those being sent now, whole answers and streams (not other responses: an export, /metrics,
   * which charge nothing), with the bytes their socket has not handed to the kernel (a stream's
   * writes queued behind those not counted).
   */
  sending(): { requestId: string | undefined; unsentBytes: number }[];
}

/** Whether `request` asked for a chat completion, the answers that are charged. */
function isChatCompletion(request: IncomingMessage | undefined): boolean {
  if (request?.method !== "POST" || request.url === undefined) return false;
  // With a trailing slash too, as the router takes it.
  const path = normalizeRequestTarget(request.url).split("?")[0];
  return path === CHAT_COMPLETIONS_PATH || path === `${CHAT_COMPLETIONS_PATH}/`;
}

/**
 * The `x-request-id` a response's head carried, read from the head as sent: Fastify hands its
 * headers to `writeHead()` whole, and Node keeps none for `getHeader()` then.
 */
function readSentRequestId(response: ServerResponse): string | undefined {
  const head = (response as ServerResponse & { _header?: unknown })._header;
  return typeof head === "string" ? /\r\nx-request-id: ([^\r]*)/i.exec(head)?.[1] : undefined;
}

function responseOf(socket: Socket): ServerResponse | null | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
}

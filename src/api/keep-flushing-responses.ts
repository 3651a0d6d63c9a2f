import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/**
 * Keeps `server.closeIdleConnections()` (which `server.close()`, and so a drain's `app.close()`,
 * calls) from destroying a connection whose response has ended but is still being sent: Node
 * counts a response done once `end()` is called, so at a drain's start a whole answer of
 * megabytes to a slow client was cut short, its bytes still in the socket's buffer, though
 * charged in full (found by a slow-consumer review). Such a connection closes once its response
 * is sent (the drain's shortened keep-alive), or at the drain's last pass (closeAllConnections).
 */
export function keepFlushingResponses(server: Server): void {
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
      const response = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
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
}

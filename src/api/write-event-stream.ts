import type { ServerResponse } from "node:http";

/**
 * How long a client may leave what was sent to it unread before it counts as gone (nginx's
 * `send_timeout` is the same minute). A client that stops reading a stream would otherwise hold
 * its request, and a local model's sequence or an upstream connection, for as long as its socket
 * stays open.
 */
export const CLIENT_STALL_TIMEOUT_MS = 60_000;

/**
 * Writes to a response that may be closed by the client at any time, honouring backpressure:
 * resolves when the data is handed to the socket, and returns false once the client is gone.
 * A client that reads nothing for `stallTimeoutMs` while data waits for it is disconnected.
 */
export async function writeToClient(
  response: ServerResponse,
  data: string,
  stallTimeoutMs: number = CLIENT_STALL_TIMEOUT_MS,
): Promise<boolean> {
  if (response.destroyed || response.writableEnded) return false;
  if (data === "") return true;
  if (response.write(data)) return true;
  // Both listeners go once either event comes: a long stream to a slow client waits many times.
  await new Promise<void>((resolve) => {
    const stalled = setTimeout(() => response.destroy(), stallTimeoutMs);
    const done = () => {
      clearTimeout(stalled);
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.on("drain", done);
    response.on("close", done);
  });
  return !response.destroyed;
}

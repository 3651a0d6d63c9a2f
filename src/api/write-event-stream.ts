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
 * A client that reads nothing for `stallTimeoutMs` while data waits for it is disconnected: its
 * connection is closed. A pipelined response queued behind an earlier one on its connection has
 * no socket yet, and its data waits for that one, not for the client: the time counts from when
 * it gets the connection (the stall timer used to run from the first write, and a stream queued
 * behind one longer than a minute was destroyed while still queued, then flushed cut short on a
 * connection left open).
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
    let stalled: NodeJS.Timeout | undefined;
    const watch = () => {
      stalled = setTimeout(() => (response.socket ?? response).destroy(), stallTimeoutMs);
    };
    const done = () => {
      clearTimeout(stalled);
      response.off("socket", watch);
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    if (response.socket !== null) watch();
    else response.once("socket", watch);
    response.on("drain", done);
    response.on("close", done);
  });
  return !response.destroyed;
}

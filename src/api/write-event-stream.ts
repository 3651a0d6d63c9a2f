import type { ServerResponse } from "node:http";

/**
 * Writes to a response that may be closed by the client at any time, honouring backpressure:
 * resolves when the data is handed to the socket, and returns false once the client is gone.
 */
export async function writeToClient(response: ServerResponse, data: string): Promise<boolean> {
  if (response.destroyed || response.writableEnded) return false;
  if (data === "") return true;
  if (response.write(data)) return true;
  // Both listeners go once either event comes: a long stream to a slow client waits many times.
  await new Promise<void>((resolve) => {
    const done = () => {
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.on("drain", done);
    response.on("close", done);
  });
  return !response.destroyed;
}

import { once } from "node:events";
import type { ServerResponse } from "node:http";

/**
 * Writes to a response that may be closed by the client at any time, honouring backpressure:
 * resolves when the data is handed to the socket, and returns false once the client is gone.
 */
export async function writeToClient(response: ServerResponse, data: string): Promise<boolean> {
  if (response.destroyed || response.writableEnded) return false;
  if (data === "") return true;
  if (response.write(data)) return true;
  await Promise.race([once(response, "drain"), once(response, "close")]);
  return !response.destroyed;
}

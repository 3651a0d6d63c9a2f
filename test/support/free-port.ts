import { createServer } from "node:net";

/**
 * A port on 127.0.0.1 that was free a moment ago: for a server to listen on, or, as nothing
 * listens there, for connections to be refused.
 */
export async function findFreePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return address.port;
}

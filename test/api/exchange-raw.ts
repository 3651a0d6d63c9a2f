import { connect } from "node:net";

/**
 * Writes `chunks` on a raw connection to 127.0.0.1:`port` and reads everything until the server
 * closes it (or 10 s pass); with `trickleMs`, then writes one more byte that often. For requests
 * an HTTP client library would not send. A reset by the server counts as its close.
 */
export function exchangeRaw(
  port: number,
  chunks: string[],
  trickleMs?: number,
): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      text += data;
    });
    const trickle = trickleMs === undefined ? undefined : setInterval(() => socket.write(" "), trickleMs);
    const stop = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false });
    }, 10_000);
    // A server that closes the connection while bytes still come resets it: the close follows,
    // and is what the caller asked about (a trickling body's write raced the close, and the
    // reset failed the exchange instead of telling it closed).
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "ECONNRESET" && error.code !== "EPIPE") reject(error);
    });
    socket.on("close", () => {
      clearInterval(trickle);
      clearTimeout(stop);
      resolve({ text, closed: true });
    });
    for (const chunk of chunks) socket.write(chunk);
  });
}

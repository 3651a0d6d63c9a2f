import { connect, createServer, type Socket } from "node:net";

/**
 * What the proxy does with connections: pass them on to the target, hold them (accept and never
 * answer, like a paused Redis), pause them (what clients send on open connections waits, and
 * goes on in order once the mode is `forward` again: what a paused Redis does with the commands
 * in its sockets when it resumes), drop their bytes (every byte either way is lost and nothing
 * is closed, as a network that black-holes packets: a statement sent then never gets its answer),
 * or cut them (close every open one and each new one at once).
 */
export type TcpProxyMode = "forward" | "hold" | "pause" | "drop" | "cut";

/** A TCP proxy on 127.0.0.1 in front of `targetHost:targetPort`, for outage tests. */
export interface TcpProxy {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Chunks received while paused and not sent on yet (a statement waiting for a paused database). */
  readonly held: number;
  /**
   * Switches the mode; `cut` also closes every open connection, `forward` leaves held ones held
   * and sends on what paused ones received.
   */
  setMode(mode: TcpProxyMode): void;
  /**
   * Switches to `drop` at the first chunk a client sends that `match` takes (that chunk is lost
   * too): a black hole from a given statement on. A later {@link setMode} cancels it.
   */
  dropFrom(match: (chunk: Buffer) => boolean): void;
  /**
   * Drops every byte of the connections open now, either way, closing nothing, while new ones are
   * passed on as the mode says: a network that black-holed the old connection only.
   */
  blackHoleOpen(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(options: {
  targetPort: number;
  /** Default 127.0.0.1. */
  targetHost?: string;
  mode: TcpProxyMode;
}): Promise<TcpProxy> {
  let mode = options.mode;
  let dropTrigger: ((chunk: Buffer) => boolean) | undefined;
  let accepted = 0;
  const sockets = new Set<Socket>();
  /** Clients whose bytes are lost for good (see blackHoleOpen). */
  const blackHoled = new Set<Socket>();
  /** What paused connections received, to send on in order. */
  const paused: (() => void)[] = [];
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    // A cut connection errors on the other side; nothing to report.
    socket.on("error", () => {});
  };
  const server = createServer((client) => {
    accepted++;
    track(client);
    if (mode === "cut") {
      client.destroy();
      return;
    }
    if (mode === "hold") return;
    const upstream = connect(options.targetPort, options.targetHost ?? "127.0.0.1");
    track(upstream);
    client.on("data", (chunk: Buffer) => {
      if (dropTrigger?.(chunk) === true) {
        dropTrigger = undefined;
        mode = "drop";
      }
      if (blackHoled.has(client)) return;
      if (mode === "pause") paused.push(() => upstream.write(chunk));
      else if (mode !== "drop") upstream.write(chunk);
    });
    // Not piped: a black hole (`drop`) loses the target's bytes too.
    upstream.on("data", (chunk: Buffer) => {
      if (mode !== "drop" && !blackHoled.has(client)) client.write(chunk);
    });
    client.on("close", () => blackHoled.delete(client));
    upstream.on("end", () => client.end());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || address === null) throw new Error("the proxy has no port");
  return {
    port: address.port,
    get accepted() {
      return accepted;
    },
    get held() {
      return paused.length;
    },
    setMode(next) {
      dropTrigger = undefined;
      mode = next;
      if (next === "cut") for (const socket of sockets) socket.destroy();
      if (next === "forward") for (const send of paused.splice(0)) send();
    },
    dropFrom(match) {
      dropTrigger = match;
    },
    blackHoleOpen() {
      for (const socket of sockets) blackHoled.add(socket);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

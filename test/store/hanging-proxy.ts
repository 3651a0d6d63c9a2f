import { connect, createServer, type Socket } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 in front of PostgreSQL that can hang as a stopped database does
 * (SIGSTOP on its processes): while hung, connections open and what clients send is held, never
 * refused or answered; once it resumes, what was held goes on in order and the answers come back.
 */
export interface HangingProxy {
  port: number;
  /** Chunks clients sent while hung, not passed on yet: a statement waiting for the database. */
  readonly held: number;
  hang(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startHangingProxy(target: { host: string; port: number }): Promise<HangingProxy> {
  let hung = false;
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  };
  const server = createServer((client) => {
    track(client);
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.on("data", (chunk: Buffer) => {
      if (hung) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || address === null) throw new Error("the proxy has no port");
  return {
    port: address.port,
    get held() {
      return held.length;
    },
    hang() {
      hung = true;
    },
    resume() {
      hung = false;
      for (const send of held.splice(0)) send();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

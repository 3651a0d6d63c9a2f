/**
 * A server, run as its own process, that promises a 6 MB body (`Content-Length`) and closes the
 * connection after half of it, as a dropped download does. Prints its port.
 * `node test/models/half-body-server.ts`
 */
import { createServer } from "node:net";

const size = 6_000_000;
const half = Buffer.alloc(size / 2, 7);
const server = createServer((socket) => {
  socket.on("error", () => {});
  socket.once("data", () => {
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`);
    socket.end(half);
  });
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${typeof address === "object" && address !== null ? address.port : 0}\n`);
});

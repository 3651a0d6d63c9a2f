/**
 * What `keepFlushingResponses(...).sending()` lists for the drain's log of answers it cuts: chat
 * answers whose head went out and whose body is not sent whole, with the bytes still held for
 * them. Regressions: other responses (a usage export, /metrics) were listed as answers "charged"
 * to their clients, and a held body was counted twice (the response's count holds its socket's).
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { keepFlushingResponses } from "../../src/api/keep-flushing-responses.ts";

const BODY = Buffer.alloc(30_000_000, "x");

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** Sends `method target` and reads the head only, then nothing: the body waits in the buffers. */
async function requestUnread(port: number, method: string, target: string): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.write(`${method} ${target} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n`);
  await once(socket, "data");
  socket.pause();
}

describe("the answers being sent", () => {
  it("are the chat answers whose body is not sent whole, each with the bytes held for it once", async () => {
    server = createServer((request, response) => {
      response.writeHead(200, { "x-request-id": `req_${request.method}_${request.url?.length}` });
      response.end(BODY);
    });
    const flushing = keepFlushingResponses(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    await requestUnread(port, "POST", "/v1/chat/completions");
    // The route as the router reads it (a doubled slash, a query): a chat answer too.
    await requestUnread(port, "POST", "//v1/chat/completions?x=1");
    await requestUnread(port, "POST", "/v1/chat/completions/");
    await requestUnread(port, "GET", "/admin/usage?format=csv");
    await requestUnread(port, "POST", "/v1/chat/completionsx");
    const sending = flushing.sending();
    expect(sending.map((each) => each.requestId).sort()).toEqual([
      "req_POST_20",
      "req_POST_21",
      "req_POST_25",
    ]);
    for (const { unsentBytes } of sending) {
      expect(unsentBytes).toBeGreaterThan(0);
      expect(unsentBytes).toBeLessThan(BODY.length);
    }
  });
});

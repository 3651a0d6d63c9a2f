/**
 * A drain that begins while a whole answer of megabytes is still being sent to a slow client:
 * Node counts the response done once `end()` is called, and the drain's `app.close()` destroyed
 * its connection with the rest of the answer still in the socket's buffer; the client got a cut
 * body and a clean end of stream, though the request was charged in full (found by a
 * slow-consumer review). Now the answer is sent whole before the connection closes.
 */
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

/** A context that holds the answers of megabytes these tests send (up to 128 bytes a token): no answer is ended past it. */
const HUGE_CONTEXT = 1_000_000;

let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Asks `server` for an answer of the model `big` on a raw socket, which the test then reads as it likes. */
function askRaw(test: TestServer, stream: boolean): Socket {
  const url = new URL(test.baseUrl);
  const body = JSON.stringify({ model: "big", messages: [{ role: "user", content: "Go" }], stream });
  const socket = connect(Number(url.port), url.hostname);
  socket.write(
    [
      "POST /v1/chat/completions HTTP/1.1",
      `host: ${url.host}`,
      `authorization: Bearer ${test.starterKey}`,
      "content-type: application/json",
      `content-length: ${Buffer.byteLength(body)}`,
      "",
      body,
    ].join("\r\n"),
  );
  return socket;
}

describe("a drain while a whole answer is still being sent", () => {
  it("sends it whole before the connection closes", async () => {
    const upstream = await startMockUpstream();
    upstream.handle(
      streamText(
        Array.from({ length: 80 }, () => "x".repeat(100_000)),
        { usage: [5, 8000] },
      ),
    );
    try {
      server = await startTestServer({
        extraModels: [createUpstreamModelEntry("big", upstream.baseUrl, { contextLength: HUGE_CONTEXT })],
      });
      const socket = askRaw(server, false);
      // A slow reader: about 2 MB a second, the 8 MB answer's rest waiting in the socket's buffers.
      let received = Buffer.alloc(0);
      let draining: Promise<void> | undefined;
      const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      socket.on("data", (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        socket.pause();
        setTimeout(() => socket.resume(), 30);
        if (draining === undefined && received.includes("\r\n\r\n")) {
          draining = new Promise((resolve) => setTimeout(resolve, 200)).then(() =>
            server?.server.shutdown({ graceMs: 20_000 }),
          );
        }
      });
      await ended;
      await draining;
      const head = received.subarray(0, received.indexOf("\r\n\r\n")).toString();
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
      expect(head).toMatch(/^HTTP\/1\.1 200/);
      expect(length).toBeGreaterThan(8_000_000);
      expect(received.length - head.length - 4).toBe(length);
    } finally {
      await upstream.close();
    }
  }, 30_000);

  // Regression: a client too slow for the drain's last pass got part of an answer charged in
  // full, and nothing said so (the drain's line said `requestsCut: 0`).
  it.each([
    ["a whole answer", false],
    ["a stream", true],
  ])(
    "logs %s its last pass cuts while it is still being sent, with its request id",
    async (_kind, stream) => {
      const upstream = await startMockUpstream();
      upstream.handle(
        streamText(
          Array.from({ length: 250 }, () => "x".repeat(100_000)),
          { usage: [5, 8000] },
        ),
      );
      const { lines, destination } = collectLogLines();
      try {
        server = await startTestServer({
          extraModels: [createUpstreamModelEntry("big", upstream.baseUrl, { contextLength: HUGE_CONTEXT })],
          logDestination: destination,
        });
        const socket = askRaw(server, stream);
        // The head, and then nothing more is read: the answer's rest waits in the buffers.
        const head = await new Promise<string>((resolve) => {
          let received = Buffer.alloc(0);
          socket.on("data", (chunk: Buffer) => {
            received = Buffer.concat([received, chunk]);
            if (!received.includes("\r\n\r\n")) return;
            socket.pause();
            resolve(received.subarray(0, received.indexOf("\r\n\r\n")).toString());
          });
        });
        const requestId = /x-request-id: (\S+)/i.exec(head)?.[1];
        expect(requestId).toBeDefined();
        const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
        socket.on("error", () => {});
        await server.server.shutdown({ graceMs: 300 });
        socket.destroy();
        await ended;
        const cut = lines.filter((line) =>
          String(line.msg).startsWith(
            "the shutdown closed a connection while its answer was still being sent",
          ),
        );
        expect(cut).toMatchObject([{ level: 40, reqId: requestId }]);
        expect(cut[0]?.unsentBytes).toBeGreaterThan(0);
        expect(lines.find((line) => line.msg === "shut down")).toMatchObject({ answersCutWhileSending: 1 });
      } finally {
        await upstream.close();
      }
    },
    30_000,
  );
});

/**
 * A drain that begins while a whole answer of megabytes is still being sent to a slow client:
 * Node counts the response done once `end()` is called, and the drain's `app.close()` destroyed
 * its connection with the rest of the answer still in the socket's buffer; the client got a cut
 * body and a clean end of stream, though the request was charged in full (found by a
 * slow-consumer review). Now the answer is sent whole before the connection closes.
 */
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

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
      server = await startTestServer({ extraModels: [createUpstreamModelEntry("big", upstream.baseUrl)] });
      const url = new URL(server.baseUrl);
      const body = JSON.stringify({ model: "big", messages: [{ role: "user", content: "Go" }] });
      const socket = connect(Number(url.port), url.hostname);
      socket.write(
        [
          "POST /v1/chat/completions HTTP/1.1",
          `host: ${url.host}`,
          `authorization: Bearer ${server.starterKey}`,
          "content-type: application/json",
          `content-length: ${Buffer.byteLength(body)}`,
          "",
          body,
        ].join("\r\n"),
      );
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
});

/**
 * A shutdown while a streamed answer waits for a client that stopped reading. The drain cut the
 * stream, then kept every connection with a request in flight open until the requests ended; a
 * stream whose client reads nothing ends only when its write gives up (the minute's stall
 * timeout), and is settled only then: the drain took a minute, and a SIGKILL meanwhile (docker
 * stop's, ten seconds in) lost the charge of the megabytes already sent, which was not in the
 * journal either. Now connections still open are closed a few seconds after the cut whatever
 * their requests do.
 */
import { once } from "node:events";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

let upstream: MockUpstream;
let test: TestServer;

beforeAll(async () => {
  upstream = await startMockUpstream();
  test = await startTestServer({
    extraModels: [createUpstreamModelEntry("upstream-chat", upstream.baseUrl)],
  });
});

afterAll(async () => {
  await test?.close().catch(() => {});
  await upstream?.close();
});

describe("a shutdown with a stream whose client stopped reading", () => {
  it("ends without waiting for the client, and the stream is charged", async () => {
    // Megabytes of answer: more than the sockets between the server and the client take.
    const piece = "x".repeat(20_000);
    upstream.handle(async (_request, response) => {
      await writeEvents(
        response,
        textEvents(
          Array.from({ length: 600 }, () => piece),
          { usage: [10, 6000] },
        ),
      );
    });
    const body = JSON.stringify({
      model: "upstream-chat",
      stream: true,
      messages: [{ role: "user", content: "Hi" }],
    });
    const url = new URL(test.baseUrl);
    const client = connect(Number(url.port), url.hostname);
    await once(client, "connect");
    client.write(
      [
        "POST /v1/chat/completions HTTP/1.1",
        `Host: ${url.host}`,
        `Authorization: Bearer ${test.starterKey}`,
        "Content-Type: application/json",
        "X-Request-Id: stalled-at-shutdown",
        `Content-Length: ${Buffer.byteLength(body)}`,
        "",
        body,
      ].join("\r\n"),
    );
    // Reads the first bytes (the answer has begun), then nothing more.
    await once(client, "data");
    client.pause();
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Before, this waited for the stall timeout (a minute): past the test's own timeout.
    await test.server.shutdown({ graceMs: 200 });
    client.destroy();
    const usage = (await test.store.listUsage({ model: "upstream-chat" })).filter(
      (row) => row.requestId === "stalled-at-shutdown",
    );
    expect(usage).toHaveLength(1);
    expect(usage[0]?.costNano).toBeGreaterThan(0n);
  }, 30_000);
});

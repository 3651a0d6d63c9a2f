import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/server.ts";
import { startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const directory = makeTemporaryDirectory();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const MEGABYTE = 1024 * 1024;

describe("the bytes of request bodies held at once", () => {
  it("refuses a body that does not fit beside those being read with 503 server_overloaded, never reading it, and takes it once they are done", async () => {
    const upstream = await startMockUpstream();
    cleanups.push(() => upstream.close());
    const server = await startServer({
      config: createTestConfig({
        server: { host: "127.0.0.1", port: 0, bodyLimitBytes: MEGABYTE },
        database: newDatabaseUrl(directory),
        models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
      }),
      logger: false,
      bodyBudgetBytes: 1.5 * MEGABYTE,
    });
    cleanups.push(() => server.close());
    const key = server.createdKeys.starterKey;
    if (key === undefined) throw new Error("no starter key");
    const url = new URL(server.baseUrl);

    // A client (a key with no balance would do) that declares most of a megabyte and sends a few bytes.
    const slow = connect(Number(url.port), url.hostname);
    slow.on("error", () => {});
    cleanups.push(async () => slow.destroy());
    await new Promise((resolve) => slow.once("connect", resolve));
    slow.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${MEGABYTE - 10}\r\n\r\n{"model":`,
    );

    const big = JSON.stringify({
      model: "remote",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 5,
      // Unknown fields are ignored: the bytes without the tokens.
      padding: "x".repeat(0.8 * MEGABYTE),
    });
    const chat = () =>
      fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: big,
      });
    // Once the slow request's headers are in, the next big body does not fit.
    let refused: Response | undefined;
    for (let attempt = 0; attempt < 100 && refused === undefined; attempt++) {
      const response = await chat();
      if (response.status === 503) refused = response;
      else await response.text();
    }
    if (refused === undefined) throw new Error("never refused");
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("server_overloaded");
    // Requests without a body still pass.
    const models = await fetch(`${server.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);

    // The slow client leaves: its bytes come back.
    slow.destroy();
    let answered: Response | undefined;
    for (let attempt = 0; attempt < 100 && answered === undefined; attempt++) {
      const response = await chat();
      if (response.status !== 503) answered = response;
      else await response.text();
    }
    expect(answered?.status, await answered?.text()).toBe(200);
  });
});

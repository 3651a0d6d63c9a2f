/**
 * A reload that leaves an upstream model's settings as they are keeps its engine, and with it the
 * rests its endpoints take (after failures, or for the upstream's `retry-after`). Regression: any
 * reload, one that changed only another model's price included, gave a model whose endpoints all
 * rested a new engine (its status was `unavailable`, which a reload retries for a local model
 * whose file was missing): the rests were forgotten and the next request went straight to an
 * upstream that had asked to be left alone for a minute (5 reloads let 6 requests through).
 */
import { afterEach, describe, expect, it } from "vitest";
import { answerError, type MockUpstream, startMockUpstream } from "../engine/openai/mock-upstream.ts";
import {
  createTestConfig,
  createUpstreamModelEntry,
  startTestServer,
  type TestServer,
} from "../support/test-server.ts";

let server: TestServer | undefined;
let upstream: MockUpstream | undefined;

afterEach(async () => {
  await server?.close();
  await upstream?.close();
  server = undefined;
  upstream = undefined;
});

describe("a reload and an upstream model whose endpoints rest", () => {
  it("keeps the rests of a model whose settings it leaves unchanged", async () => {
    upstream = await startMockUpstream();
    upstream.handle(answerError(429, undefined, { "retry-after": "60" }));
    const resting = createUpstreamModelEntry("resting", upstream.baseUrl);
    const other = createUpstreamModelEntry("other", upstream.baseUrl);
    server = await startTestServer({ extraModels: [resting, other] });
    const ask = () =>
      fetch(`${server?.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server?.starterKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "resting", messages: [{ role: "user", content: "Hi" }] }),
      });
    const first = await ask();
    expect(first.status).toBe(503);
    const asked = upstream.requests.length;
    expect(asked).toBeGreaterThan(0);

    // Only the other model's price changes (a reload reads only the catalogue).
    await server.server.reload(
      createTestConfig({
        database: "sqlite::memory:",
        models: [
          resting,
          { ...other, pricing: { kind: "chat", inputPerMillion: "3.00", outputPerMillion: "4.00" } },
        ],
      }),
    );
    const second = await ask();
    expect(second.status).toBe(503);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(50);
    // Refused from the rest: the upstream was not asked again.
    expect(upstream.requests.length).toBe(asked);
  });
});

/**
 * A non-streamed answer's `x-ratelimit-remaining-tokens` tells what the key's token bucket holds
 * once the request's real usage is known. Regression: it told the bucket after the admission's
 * estimate (its prompt's bound plus max_tokens) was taken, before the usage gave the rest back,
 * so clients that pace themselves by it slowed down for nothing (found by a limits review).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

const MODEL = "tpm-upstream";
const TPM = 6_000;

let upstream: MockUpstream;
let server: TestServer;

beforeAll(async () => {
  // Whatever is asked, the upstream reports 10 prompt and 4 completion tokens.
  upstream = await startMockUpstream(streamText(["Hello", " there"], { usage: [10, 4] }));
  server = await startTestServer({ extraModels: [createUpstreamModelEntry(MODEL, upstream.baseUrl)] });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

describe("the tokens headers of a non-streamed answer", () => {
  it("tell the bucket after the usage corrected the estimate", async () => {
    const { key } = await server.createFundedKey("tpm-headers", "10", { tpm: TPM });
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2_000 }),
    });
    expect(response.status).toBe(200);
    expect((await response.json()) as { usage: { total_tokens: number } }).toMatchObject({
      usage: { total_tokens: 14 },
    });
    const remaining = Number(response.headers.get("x-ratelimit-remaining-tokens"));
    // 14 used of 6000; the bucket refills 100 a second, and it is full again at 6000.
    expect(remaining).toBeGreaterThanOrEqual(TPM - 14);
    expect(remaining).toBeLessThanOrEqual(TPM);
    // Not what it held after the estimate (2000 of max_tokens alone) was taken.
    expect(remaining).toBeGreaterThan(TPM - 2_000);
  });
});

/**
 * An upstream that ignores the `max_tokens` it is sent (a broken server, a bridge that drops the
 * field) has its answer ended past it and is charged no more than it: it streamed 67 MB for
 * `max_tokens: 10`, passed on up to the 32 MiB cap, and the client was charged 2.24 against a
 * reservation of 0.0000048, as far as its balance paid.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chunk, type MockUpstream, startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

let upstream: MockUpstream;
let server: TestServer;
/** Chunks the upstream wrote to the last request before its connection closed. */
let written = 0;

beforeAll(async () => {
  // Up to 20,000 chunks of 200 characters (4 MB), each with a count a token per character.
  upstream = await startMockUpstream(async (_request, response) => {
    let closed = false;
    response.on("close", () => {
      closed = true;
    });
    response.writeHead(200, { "content-type": "text/event-stream" });
    for (written = 0; written < 20_000 && !closed; written++) {
      const event = { ...chunk({ content: `${"z".repeat(199)} ` }), usage: usageOf(written) };
      if (!response.write(`data: ${JSON.stringify(event)}\n\n`))
        await new Promise((resolve) => setTimeout(resolve, 1));
    }
    if (!closed) response.end("data: [DONE]\n\n");
  });
  // 1.00 in and 2.00 out per million tokens.
  server = await startTestServer({ extraModels: [createUpstreamModelEntry("flood", upstream.baseUrl)] });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

function usageOf(chunks: number) {
  return { prompt_tokens: 20, completion_tokens: 200 * (chunks + 1), total_tokens: 20 + 200 * (chunks + 1) };
}

function chat(key: string, stream: boolean) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "flood",
      messages: [{ role: "user", content: "Say a word." }],
      max_tokens: 10,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
  });
}

describe.each([false, true])("an upstream that ignores max_tokens (stream: %s)", (stream) => {
  it("has its answer ended as length and is charged no more than max_tokens", async () => {
    const { accountId, key } = await server.createFundedKey(`flood-${stream}`, "0.01");
    const response = await chat(key, stream);
    expect(response.status).toBe(200);
    const text = await response.text();
    // A few KiB of it (what one read brings past the cut), not 4 MB.
    expect(text.length).toBeLessThan(512 * 1024);
    expect(text).toMatch(/"finish_reason":"length"/);
    expect(text).toMatch(/"completion_tokens":10,/);
    expect(upstream.requests.at(-1)?.body).toMatchObject({ max_tokens: 10 });
    expect(written).toBeLessThan(20_000);
    const [row, ...others] = await server.store.listUsage({ accountId });
    expect(others).toEqual([]);
    expect(row).toMatchObject({ completionTokens: 10, finishReason: "length" });
    // The prompt as the upstream last counted it (20) or estimated, and 10 completion tokens.
    const promptTokens = row?.promptTokens ?? 0;
    expect(row?.costNano).toBe(BigInt(promptTokens) * 1_000n + 10n * 2_000n);
    expect(await server.store.getAccountMoney(accountId)).toMatchObject({
      balanceNano: 10_000_000n - (row?.costNano ?? 0n),
      reservedNano: 0n,
    });
  });
});

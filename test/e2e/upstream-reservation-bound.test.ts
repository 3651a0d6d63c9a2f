/**
 * An upstream model's reservation is priced from the most prompt tokens the request can count
 * (its texts' UTF-8 bytes), not from the estimate: crafted text (here combining marks, about 11x
 * more tokens upstream than estimated) otherwise got admitted on a reservation its real cost far
 * exceeded, and the excess went uncharged once the balance was spent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

/** 2,500 characters, 4,500 UTF-8 bytes: one letter and four combining marks, 500 times. */
const CRAFTED = "a\u0336\u0337\u0338\u0339".repeat(500);
const CRAFTED_BYTES = Buffer.byteLength(CRAFTED, "utf8");

let upstream: MockUpstream;
let server: TestServer;

beforeAll(async () => {
  // An upstream that counts a token per byte of the prompt, as o200k does for these marks.
  upstream = await startMockUpstream(async (request, response) => {
    const messages = request.body.messages as { content: string }[];
    const bytes = messages.reduce((sum, message) => sum + Buffer.byteLength(message.content, "utf8"), 0);
    await writeEvents(response, textEvents(["ok"], { usage: [bytes, 1] }));
  });
  // 1.00 in and 2.00 out per million tokens.
  server = await startTestServer({ extraModels: [createUpstreamModelEntry("bound", upstream.baseUrl)] });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

function chat(key: string) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "bound", messages: [{ role: "user", content: CRAFTED }], max_tokens: 10 }),
  });
}

describe("the reservation of an upstream request with crafted text", () => {
  it("refuses what the balance could pay only on the estimate (403), charging nothing", async () => {
    // The estimate (about 430 tokens: 0.00045 with the completion bound) fits; the real prompt
    // (4,500 tokens: 0.0045) does not.
    const { accountId, key } = await server.createFundedKey("crafted-short", "0.001");
    const response = await chat(key);
    expect(response.status).toBe(403);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("insufficient_balance");
    expect(upstream.requests).toHaveLength(0);
    expect(await server.store.getAccountMoney(accountId)).toMatchObject({
      balanceNano: 1_000_000n,
      spentNano: 0n,
    });
  });

  it("charges the whole real cost of a request the balance covers", async () => {
    const { accountId, key } = await server.createFundedKey("crafted-funded", "0.01");
    const response = await chat(key);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(
      CRAFTED_BYTES,
    );
    // 4,500 x 1.00 + 1 x 2.00 per million, all of it.
    expect(await server.store.getAccountMoney(accountId)).toMatchObject({
      spentNano: 4_502_000n,
      reservedNano: 0n,
    });
  });
});

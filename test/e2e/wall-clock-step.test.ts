/**
 * The wall clock steps back (an NTP step, a virtual machine resumed) while a request runs. Its
 * timings used to be wall-clock differences: negative, refused by the ledger's columns, so the
 * settle failed on every retry, the charge was never recorded and the reservation stayed open.
 * Timings come from the monotonic clock now; only the times of day (`created`, the row's time)
 * follow the wall clock.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

const realNow = Date.now;
/** The wall clock's step; installed before the server starts, so that all its code sees it. */
let offset = 0;
let upstream: MockUpstream;
let server: TestServer;

beforeAll(async () => {
  Date.now = () => realNow() + offset;
  upstream = await startMockUpstream();
  server = await startTestServer({ extraModels: [createUpstreamModelEntry("stepped", upstream.baseUrl)] });
});

afterEach(() => {
  offset = 0;
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
  Date.now = realNow;
});

async function usageRowOf(accountId: string, requestId: string) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const row = (await server.store.listUsage({ accountId })).find((found) => found.requestId === requestId);
    if (row !== undefined) return row;
    await sleep(20);
  }
  return undefined;
}

describe("a wall clock that steps back during a request", () => {
  it("still records the charge, with timings that are not negative", async () => {
    const { accountId, key } = await server.createFundedKey("stepped-clock", "10");
    upstream.handle(async (_request, response) => {
      await sleep(50);
      // Two minutes back, while the upstream answers.
      offset = -120_000;
      await writeEvents(response, textEvents(["Hello", " world"], { usage: [10, 1000] }));
    });

    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        "x-request-id": "stepped",
      },
      body: JSON.stringify({
        model: "stepped",
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1000,
      }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { usage: unknown }).usage).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 1000,
    });

    const row = await usageRowOf(accountId, "stepped");
    expect(row).toBeDefined();
    // 10 x 1.00 + 1000 x 2.00 per million: 0.00201.
    expect(row?.costNano).toBe(2_010_000n);
    expect(row?.totalMs).toBeGreaterThanOrEqual(0);
    expect(row?.firstTokenMs).toBeGreaterThanOrEqual(0);
    expect(await server.store.getAccountMoney(accountId)).toMatchObject({
      spentNano: 2_010_000n,
      reservedNano: 0n,
    });
  });
});

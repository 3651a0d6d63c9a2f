import { describe, expect, it } from "vitest";
import type { RequestKey } from "../../src/chat/request-key.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";

function keyWith(rpm: number): RequestKey {
  return {
    publicId: `key${rpm}`,
    accountId: "acct",
    role: "user",
    allowedModels: undefined,
    rpm,
    tpm: undefined,
  };
}

/** The message of the 429 that the request after a spent bucket gets. */
async function refusal(rpm: number): Promise<string> {
  const limits = new KeyLimits(new MemoryRateLimiter());
  const headers = new Map<string, string>();
  const setHeader = (name: string, value: string) => void headers.set(name, value);
  for (let taken = 0; taken < rpm; taken++) await limits.takeRequest(keyWith(rpm), setHeader);
  const error = await limits.takeRequest(keyWith(rpm), setHeader).catch((caught: unknown) => caught);
  expect(headers.get("x-ratelimit-remaining-requests")).toBe("0");
  return (error as Error).message;
}

describe("KeyLimits' 429 message", () => {
  it("names the limit in words that agree with it (regression: 'allows 1 requests per minute')", async () => {
    expect(await refusal(1)).toMatch(/^Rate limit reached: this key allows 1 request per minute\. Retry in /);
    expect(await refusal(2)).toMatch(
      /^Rate limit reached: this key allows 2 requests per minute\. Retry in /,
    );
  });
});

import { describe, expect, it } from "vitest";
import { computeRetryDelay } from "../../../src/engine/openai/compute-retry-delay.ts";

describe("computeRetryDelay", () => {
  it("doubles per retry with equal jitter, up to the maximum", () => {
    const low = () => 0;
    const high = () => 0.999_999;
    expect(computeRetryDelay({ retry: 1, baseMs: 100, maxMs: 1000, random: low })).toBe(50);
    expect(computeRetryDelay({ retry: 1, baseMs: 100, maxMs: 1000, random: high })).toBe(100);
    expect(computeRetryDelay({ retry: 3, baseMs: 100, maxMs: 1000, random: low })).toBe(200);
    expect(computeRetryDelay({ retry: 10, baseMs: 100, maxMs: 1000, random: high })).toBe(1000);
  });

  it("is never shorter than the upstream's retry-after", () => {
    expect(
      computeRetryDelay({ retry: 1, baseMs: 100, maxMs: 1000, retryAfterMs: 3000, random: () => 0.5 }),
    ).toBe(3000);
  });
});

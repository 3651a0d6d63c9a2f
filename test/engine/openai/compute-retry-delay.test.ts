import { describe, expect, it } from "vitest";
import { computeRetryDelay } from "../../../src/engine/openai/compute-retry-delay.ts";

const low = () => 0;
const high = () => 0.999_999;

describe("computeRetryDelay", () => {
  it("doubles per retry with equal jitter, up to the maximum", () => {
    expect(computeRetryDelay({ retry: 1, baseMs: 100, maxMs: 1000, random: low })).toBe(50);
    expect(computeRetryDelay({ retry: 1, baseMs: 100, maxMs: 1000, random: high })).toBe(100);
    expect(computeRetryDelay({ retry: 3, baseMs: 100, maxMs: 1000, random: low })).toBe(200);
    expect(computeRetryDelay({ retry: 10, baseMs: 100, maxMs: 1000, random: high })).toBe(1000);
  });

  it("waits out a rest (retry-after, cooldown), plus a random part so waiters do not come back at once (regression)", () => {
    const options = { retry: 1, baseMs: 100, maxMs: 1000, restingMs: 3000 };
    expect(computeRetryDelay({ ...options, random: low })).toBe(3000);
    expect(computeRetryDelay({ ...options, random: () => 0.5 })).toBe(3375);
    // A quarter of the rest, or the backoff when that is longer.
    expect(computeRetryDelay({ ...options, random: high })).toBeCloseTo(3750);
    expect(computeRetryDelay({ ...options, restingMs: 200, random: high })).toBeCloseTo(300);
    expect(computeRetryDelay({ ...options, retry: 2, restingMs: 200, random: high })).toBeCloseTo(400);
  });

  it("keeps a pause for a rest within what the caller allows, when the rest fits", () => {
    const options = { retry: 1, baseMs: 100, maxMs: 1000, restingMs: 3000 };
    // Drawn within it, not cut at it (which would bring waiters together at the bound).
    expect(computeRetryDelay({ ...options, withinMs: 3200, random: () => 0.5 })).toBe(3100);
    expect(computeRetryDelay({ ...options, withinMs: 3200, random: high })).toBeLessThan(3200);
    expect(computeRetryDelay({ ...options, withinMs: 3200, random: low })).toBe(3000);
    // A rest that does not fit is returned as it is, for the caller to see.
    expect(computeRetryDelay({ ...options, withinMs: 2000, random: high })).toBe(3000);
  });
});

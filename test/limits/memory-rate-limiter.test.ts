import { describe, expect, it } from "vitest";
import { formatReset } from "../../src/limits/format-reset.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import { describeRateLimiterConformance } from "./rate-limiter-conformance.ts";

describeRateLimiterConformance("memory", async () => {
  let now = 1_000_000;
  return {
    limiter: new MemoryRateLimiter({ now: () => now }),
    advance: async (milliseconds) => {
      now += milliseconds;
    },
  };
});

describe("formatReset", () => {
  it("writes resets the way OpenAI does", () => {
    expect(formatReset(0)).toBe("0s");
    expect(formatReset(17)).toBe("17ms");
    expect(formatReset(1000)).toBe("1s");
    expect(formatReset(1001)).toBe("2s");
    expect(formatReset(360_000)).toBe("6m0s");
    expect(formatReset(61_500)).toBe("1m2s");
  });
});

import { describe, expect, it, vi } from "vitest";
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

describe("MemoryRateLimiter's own clock", () => {
  it("does not refill when the wall clock steps forward", async () => {
    const realNow = Date.now.bind(Date);
    let stepMs = 0;
    const wall = vi.spyOn(Date, "now").mockImplementation(() => realNow() + stepMs);
    try {
      const limiter = new MemoryRateLimiter();
      const request = { bucket: "key:rpm", limit: 2 };
      expect((await limiter.take({ ...request, amount: 1 })).allowed).toBe(true);
      expect((await limiter.take({ ...request, amount: 1 })).allowed).toBe(true);
      // NTP (or a resumed VM) sets the wall clock ten minutes on: no real time has passed.
      stepMs = 600_000;
      expect((await limiter.take({ ...request, amount: 1 })).allowed).toBe(false);
    } finally {
      wall.mockRestore();
    }
  });
});

describe("MemoryRateLimiter's buckets", () => {
  it("are let go once refilled, and one made anew starts full, as the old would be (regression: kept for ever)", async () => {
    let now = 1_000_000;
    const limiter = new MemoryRateLimiter({ now: () => now });
    for (let key = 0; key < 100; key++) await limiter.take({ bucket: `key${key}:rpm`, limit: 10, amount: 1 });
    // One taken below zero (an answer longer than its reservation): a minute does not refill it.
    await limiter.adjust({ bucket: "owed:tpm", limit: 100, amount: -150 });
    expect(limiter.size).toBe(101);
    now += 60_000;
    // The first use after a minute looks: only the bucket still refilling stays, beside key0's new one.
    const taken = await limiter.take({ bucket: "key0:rpm", limit: 10, amount: 1 });
    expect(taken).toMatchObject({ allowed: true, remaining: 9 });
    expect(limiter.size).toBe(2);
    // owed:tpm went 150 below zero (an answer longer than reserved): it refills from there.
    expect(await limiter.peek({ bucket: "owed:tpm", limit: 100 })).toMatchObject({ remaining: 50 });
  });
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

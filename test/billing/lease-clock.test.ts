import { describe, expect, it } from "vitest";
import { LeaseClock } from "../../src/billing/lease-clock.ts";

describe("LeaseClock", () => {
  it("reads as the store's clock from halfway through the reading, then follows the steady clock", async () => {
    let steady = 1_000;
    const clock = new LeaseClock({ steadyNow: () => steady });
    await clock.sync(async () => {
      // The store answers 40 ms into a round trip of 100.
      steady += 40;
      const storeTime = Date.UTC(2026, 0, 1);
      steady += 60;
      return storeTime;
    });
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1) + 50);
    steady += 1_000;
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1) + 1_050);
    expect(clock.steadyNow()).toBe(steady);
  });

  it("keeps its last reading when the store does not answer", async () => {
    let steady = 0;
    const clock = new LeaseClock({ steadyNow: () => steady });
    await clock.sync(async () => 5_000);
    await expect(clock.sync(async () => Promise.reject(new Error("store down")))).rejects.toThrow(
      "store down",
    );
    steady += 10;
    expect(clock.now()).toBe(5_010);
  });

  it("is this machine's clock until it reads the store's", () => {
    const clock = new LeaseClock();
    expect(Math.abs(clock.now() - Date.now())).toBeLessThan(1_000);
  });
});

import { describe, expect, it } from "vitest";
import { LeaseClock } from "../../src/billing/lease-clock.ts";

const STORE_TIME = Date.UTC(2026, 0, 1);

/** A lease clock on the test's steady and wall clocks, which move together unless told. */
function setUp() {
  const time = { steady: 1_000, wall: Date.UTC(2025, 5, 1) };
  const clock = new LeaseClock({ steadyNow: () => time.steady, wallNow: () => time.wall });
  const pass = (milliseconds: number) => {
    time.steady += milliseconds;
    time.wall += milliseconds;
  };
  return { time, clock, pass };
}

describe("LeaseClock", () => {
  it("reads as the store's clock from halfway through the reading, then follows this machine's", async () => {
    const { clock, pass } = setUp();
    await clock.sync(async () => {
      // The store answers 40 ms into a round trip of 100.
      pass(40);
      pass(60);
      return STORE_TIME;
    });
    expect(clock.now()).toBe(STORE_TIME + 50);
    pass(1_000);
    expect(clock.now()).toBe(STORE_TIME + 1_050);
    expect(clock.earliestNow()).toBe(STORE_TIME + 1_050);
  });

  it("writes leases on the later reckoning and judges them on the earlier one, whichever clock erred", async () => {
    const { time, clock, pass } = setUp();
    await clock.sync(async () => STORE_TIME);
    // The wall clock steps an hour back (NTP): the steady clock is right.
    time.wall -= 3_600_000;
    pass(1_000);
    expect(clock.now()).toBe(STORE_TIME + 1_000);
    expect(clock.earliestNow()).toBe(STORE_TIME + 1_000 - 3_600_000);

    // The machine sleeps five minutes: the steady clock stood still, the wall clock is right.
    await clock.sync(async () => STORE_TIME);
    time.wall += 300_000;
    expect(clock.now()).toBe(STORE_TIME + 300_000);
    expect(clock.earliestNow()).toBe(STORE_TIME);
  });

  it("keeps its last reading when the store does not answer", async () => {
    const { clock, pass } = setUp();
    await clock.sync(async () => 5_000);
    await expect(clock.sync(async () => Promise.reject(new Error("store down")))).rejects.toThrow(
      "store down",
    );
    pass(10);
    expect(clock.now()).toBe(5_010);
  });

  it("is this machine's clock until it reads the store's", () => {
    const clock = new LeaseClock();
    expect(Math.abs(clock.now() - Date.now())).toBeLessThan(1_000);
    expect(Math.abs(clock.earliestNow() - Date.now())).toBeLessThan(1_000);
    expect(clock.steadyNow()).toBeLessThanOrEqual(performance.now());
  });
});

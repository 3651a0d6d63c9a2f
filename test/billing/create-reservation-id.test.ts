import { describe, expect, it } from "vitest";
import { createReservationId } from "../../src/billing/create-reservation-id.ts";

describe("createReservationId", () => {
  it("is a version 7 UUID whose first 48 bits are the milliseconds", () => {
    const now = Date.UTC(2026, 10, 26, 5, 30, 0, 123);
    const id = createReservationId(now);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(now);
    expect(createReservationId(0).slice(0, 13)).toBe("00000000-0000");
    expect(createReservationId(2 ** 48 - 1).slice(0, 13)).toBe("ffffffff-ffff");
  });

  it("sorts by time and does not repeat", () => {
    const start = 1_790_000_000_000;
    const ids = Array.from({ length: 5000 }, (_, index) => createReservationId(start + index));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    // Made in the same millisecond, ids differ in their random bits (74 of them, in every place).
    const same = new Set(Array.from({ length: 2000 }, () => createReservationId(start).slice(14)));
    expect(same.size).toBe(2000);
    const variety = new Set([...same].map((id) => id.slice(-1)));
    expect(variety.size).toBe(16);
  });
});

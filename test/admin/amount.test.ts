import { describe, expect, it } from "vitest";
import { formatNano, parseAmountToNano } from "../../src/admin/amount.ts";

describe("parseAmountToNano", () => {
  it.each([
    ["0", 0n],
    ["10", 10_000_000_000n],
    ["0.25", 250_000_000n],
    ["1.000000001", 1_000_000_001n],
    ["007.5", 7_500_000_000n],
    ["9223372036.854775807", 9_223_372_036_854_775_807n],
  ])("reads %s", (text, nano) => {
    expect(parseAmountToNano(text)).toBe(nano);
  });

  it.each([
    ["a negative amount", "-1", /not an amount/],
    ["an exponent", "1e3", /not an amount/],
    ["spaces", " 1", /not an amount/],
    ["an empty text", "", /not an amount/],
    ["a bare point", "1.", /not an amount/],
    ["ten decimals", "0.0000000001", /more than 9 decimal places/],
    ["more than 64 bits", "9223372036.854775808", /too large/],
  ])("refuses %s", (_case, text, message) => {
    expect(() => parseAmountToNano(text)).toThrow(message);
  });
});

describe("formatNano", () => {
  it.each([
    [0n, "0"],
    [10_000_000_000n, "10"],
    [250_000_000n, "0.25"],
    [1_000_000_001n, "1.000000001"],
    [-3_500_000_000n, "-3.5"],
  ])("writes %s as %s", (nano, text) => {
    expect(formatNano(nano)).toBe(text);
  });
});

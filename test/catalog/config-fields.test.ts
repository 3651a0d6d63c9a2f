import { describe, expect, it } from "vitest";
import { describeValue } from "../../src/catalog/config-fields.ts";

describe("describeValue", () => {
  it("shows a long string by its start", () => {
    expect(describeValue("short")).toBe('"short"');
    expect(describeValue("x".repeat(80))).toBe(JSON.stringify("x".repeat(80)));
    expect(describeValue("x".repeat(81))).toBe(`"${"x".repeat(77)}..."`);
    expect(describeValue("secret", { secret: true })).toBe("a string");
  });

  // Regression: the start was cut at 77 code units, which could split an emoji and show "\ud83d".
  it("shows the start of a long string without cutting an emoji in half", () => {
    expect(describeValue(`${"x".repeat(76)}😀${"y".repeat(10)}`)).toBe(`"${"x".repeat(76)}..."`);
    expect(describeValue(`${"x".repeat(75)}😀${"y".repeat(10)}`)).toBe(`"${"x".repeat(75)}😀..."`);
  });
});

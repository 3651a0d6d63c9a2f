import { describe, expect, it } from "vitest";
import { suggestName } from "../../src/catalog/suggest-name.ts";

describe("suggestName", () => {
  const keys = ["host", "port", "body_limit", "parallel", "max_queue", "models"];

  it.each([
    ["prot", "port"],
    ["paralel", "parallel"],
    ["bodyLimit", "body_limit"],
    ["MAX-QUEUE", "max_queue"],
    ["model", "models"],
    ["hots", "host"],
  ])("suggests %j for %j", (input, expected) => {
    expect(suggestName(input, keys)).toBe(expected);
  });

  it.each(["x", "colour", "database_url", ""])("suggests nothing for the unrelated %j", (input) => {
    expect(suggestName(input, keys)).toBeUndefined();
  });

  it("does not measure a name far longer than any it knows (an 8 MB admin field name took 12 s and 1.7 GB)", () => {
    expect(suggestName("p".repeat(20_000_000), keys)).toBeUndefined();
    expect(suggestName(`${"x".repeat(40)}port`, ["port", `${"x".repeat(40)}prot`])).toBe(
      `${"x".repeat(40)}prot`,
    );
  });

  it("suggests nothing from an empty list", () => {
    expect(suggestName("port", [])).toBeUndefined();
  });
});

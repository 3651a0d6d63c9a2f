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

  it("suggests nothing from an empty list", () => {
    expect(suggestName("port", [])).toBeUndefined();
  });
});

import { describe, expect, it } from "vitest";
import { convertUsage } from "../../../src/engine/openai/convert-usage.ts";

describe("convertUsage", () => {
  it("reads both counts", () => {
    expect(convertUsage({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 })).toEqual({
      promptTokens: 10,
      completionTokens: 5,
    });
  });

  it("keeps missing, null or invalid counts undefined, never 0", () => {
    expect(convertUsage({ prompt_tokens: 10, completion_tokens: null })).toEqual({
      promptTokens: 10,
      completionTokens: undefined,
    });
    expect(convertUsage({ prompt_tokens: -1, completion_tokens: 2.5 })).toBeUndefined();
    expect(convertUsage({ prompt_tokens: "10" })).toBeUndefined();
  });

  it("reads no usage from a non-object", () => {
    expect(convertUsage(null)).toBeUndefined();
    expect(convertUsage("usage")).toBeUndefined();
    expect(convertUsage({})).toBeUndefined();
  });
});

import { describe, expect, it } from "vitest";
import { convertUsage, MAX_REPORTED_TOKENS } from "../../../src/engine/openai/convert-usage.ts";

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

  it("reads an absurd count as the bound and marks the usage estimated (regression: a settle that could never bind)", () => {
    expect(convertUsage({ prompt_tokens: Number.MAX_SAFE_INTEGER, completion_tokens: 1 })).toEqual({
      promptTokens: MAX_REPORTED_TOKENS,
      completionTokens: 1,
      estimated: true,
    });
    expect(convertUsage({ completion_tokens: MAX_REPORTED_TOKENS + 1 })).toEqual({
      promptTokens: undefined,
      completionTokens: MAX_REPORTED_TOKENS,
      estimated: true,
    });
    expect(convertUsage({ prompt_tokens: MAX_REPORTED_TOKENS, completion_tokens: 0 })).toEqual({
      promptTokens: MAX_REPORTED_TOKENS,
      completionTokens: 0,
    });
  });

  it("reads no usage from a non-object", () => {
    expect(convertUsage(null)).toBeUndefined();
    expect(convertUsage("usage")).toBeUndefined();
    expect(convertUsage({})).toBeUndefined();
  });
});

import { describe, expect, it } from "vitest";
import { convertUsage, MAX_REPORTED_TOKENS, mergeUsage } from "../../../src/engine/openai/convert-usage.ts";

describe("convertUsage", () => {
  it("reads both counts", () => {
    expect(convertUsage({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 })).toEqual({
      promptTokens: 10,
      completionTokens: 5,
    });
  });

  it("reads OpenAI's breakdowns of each count, whole numbers within the count", () => {
    expect(
      convertUsage({
        prompt_tokens: 10,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 4, audio_tokens: 11, other: 1 },
        completion_tokens_details: { reasoning_tokens: 2.5, rejected_prediction_tokens: 5 },
      }),
    ).toEqual({
      promptTokens: 10,
      completionTokens: 5,
      details: { prompt: { cached_tokens: 4 }, completion: { rejected_prediction_tokens: 5 } },
    });
    // A breakdown of a count the report does not give breaks down nothing.
    expect(convertUsage({ completion_tokens: 5, prompt_tokens_details: { cached_tokens: 4 } })).toEqual({
      promptTokens: undefined,
      completionTokens: 5,
    });
  });

  it("merges breakdowns with their counts: a later whole report replaces them, a partial one keeps the other's", () => {
    const first = convertUsage({ prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 4 } });
    const last = convertUsage({ completion_tokens: 7, completion_tokens_details: { reasoning_tokens: 3 } });
    if (last === undefined) throw new Error("the completion count was not read");
    expect(mergeUsage(first, last)).toEqual({
      promptTokens: 10,
      completionTokens: 7,
      details: { prompt: { cached_tokens: 4 }, completion: { reasoning_tokens: 3 } },
    });
    expect(mergeUsage(first, { promptTokens: 12, completionTokens: 7 })).toEqual({
      promptTokens: 12,
      completionTokens: 7,
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

  it("reads counts beyond 2^53 as the bound too, never as a count to estimate (regression: a larger count charged less)", () => {
    for (const huge of [2 ** 53, 1e16, 1e20, JSON.parse("1e400") as number]) {
      expect(convertUsage({ prompt_tokens: huge, completion_tokens: 1 })).toEqual({
        promptTokens: MAX_REPORTED_TOKENS,
        completionTokens: 1,
        estimated: true,
      });
      expect(convertUsage({ prompt_tokens: 3, completion_tokens: huge })).toEqual({
        promptTokens: 3,
        completionTokens: MAX_REPORTED_TOKENS,
        estimated: true,
      });
    }
  });

  it("reads no usage from a non-object", () => {
    expect(convertUsage(null)).toBeUndefined();
    expect(convertUsage("usage")).toBeUndefined();
    expect(convertUsage({})).toBeUndefined();
  });
});

describe("mergeUsage", () => {
  it("replaces only the counts a later report gives (regression: a final completion count dropped the prompt count)", () => {
    const early = { promptTokens: 1000, completionTokens: 0 };
    expect(mergeUsage(early, { promptTokens: undefined, completionTokens: 2 })).toEqual({
      promptTokens: 1000,
      completionTokens: 2,
    });
    expect(mergeUsage(undefined, { promptTokens: 7, completionTokens: undefined })).toEqual({
      promptTokens: 7,
      completionTokens: undefined,
    });
  });

  it("takes a later report with both counts whole, and keeps a count taken at the bound marked estimated", () => {
    const bounded = { promptTokens: MAX_REPORTED_TOKENS, completionTokens: undefined, estimated: true };
    expect(mergeUsage(bounded, { promptTokens: 10, completionTokens: 3 })).toEqual({
      promptTokens: 10,
      completionTokens: 3,
    });
    expect(mergeUsage(bounded, { promptTokens: undefined, completionTokens: 3 })).toEqual({
      promptTokens: MAX_REPORTED_TOKENS,
      completionTokens: 3,
      estimated: true,
    });
  });
});

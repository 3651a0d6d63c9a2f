import { describe, expect, it } from "vitest";
import { checkContextLength } from "../../src/engine/check-context-length.ts";

function refusalOf(options: Parameters<typeof checkContextLength>[0]): string | undefined {
  try {
    checkContextLength(options);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe("checkContextLength", () => {
  it("takes a prompt with room left for at least one token, and a completion that fits beside it", () => {
    expect(refusalOf({ contextLength: 2048, promptTokens: 2047, maxTokens: undefined })).toBeUndefined();
    expect(refusalOf({ contextLength: 2048, promptTokens: 2000, maxTokens: 48 })).toBeUndefined();
  });

  it("says a prompt that fills the context exactly leaves no room for the completion (regression)", () => {
    // It said "maximum context length is 2048 tokens. However, your messages resulted in 2048
    // tokens", which reads as a prompt that fits.
    expect(refusalOf({ contextLength: 2048, promptTokens: 2048, maxTokens: undefined })).toBe(
      "This model's maximum context length is 2048 tokens. However, your messages resulted in 2048 tokens, which leaves no room for the completion. Please reduce the length of the messages.",
    );
  });

  it("says only the count of a prompt longer than the context", () => {
    expect(refusalOf({ contextLength: 2048, promptTokens: 2049, maxTokens: undefined })).toBe(
      "This model's maximum context length is 2048 tokens. However, your messages resulted in 2049 tokens. Please reduce the length of the messages.",
    );
  });

  it("names the prompt and completion of a request that asks for more than the context", () => {
    expect(
      refusalOf({ contextLength: 2048, promptTokens: 2000, maxTokens: 49, alsoCounted: "the tools' texts" }),
    ).toBe(
      "This model's maximum context length is 2048 tokens. However, you requested 2049 tokens (2000 in the messages (the tools' texts count as part of them), 49 in the completion). Please reduce the length of the messages or completion.",
    );
  });
});

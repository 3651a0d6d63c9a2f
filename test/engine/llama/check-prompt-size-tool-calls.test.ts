import type { Token, Tokenizer } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ContextLengthError } from "../../../src/engine/check-context-length.ts";
import type { ChatMessage } from "../../../src/engine/engine.ts";
import {
  checkPromptSize,
  checkTemplateTokens,
  documentedToolTexts,
} from "../../../src/engine/llama/check-prompt-size.ts";

/** A tokenizer of one token a character, recording what it was given. */
function recordingTokenizer() {
  const pieces: string[] = [];
  const tokenizer = ((text: string) => {
    pieces.push(text);
    return Array.from({ length: text.length }, () => 1 as Token);
  }) as Tokenizer;
  return { tokenizer, pieces };
}

function emptyCalls(count: number): ChatMessage[] {
  return [
    { role: "user", content: "hi" },
    {
      role: "assistant",
      content: null,
      toolCalls: Array.from({ length: count }, () => ({ id: "", name: "", arguments: "" })),
    },
  ];
}

describe("checkPromptSize with tool calls", () => {
  // Regression: one assistant message counted as one item whatever its calls, and empty calls as
  // no text: 126,000 of them (8 MB) were rendered and tokenized whole, 14 s, then refused.
  it("counts each call's template tokens, refusing 126,000 empty calls without tokenizing anything", async () => {
    const { tokenizer, pieces } = recordingTokenizer();
    const refusal = await checkPromptSize({
      messages: emptyCalls(126_000),
      tokenizer,
      contextLength: 2048,
      maxTokens: 4,
      historyItems: 2,
      templateTokensPerItem: 5,
      templateTokensPerCall: 24,
    }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ContextLengthError);
    expect((refusal as ContextLengthError).message).toContain(
      "you requested more than 3024014 tokens (more than 3024010 in the messages, 4 in the completion)",
    );
    expect(pieces).toEqual([]);
  });

  it("leaves a few calls to the renderer, which counts them exactly", async () => {
    const { tokenizer, pieces } = recordingTokenizer();
    await checkPromptSize({
      messages: emptyCalls(999),
      tokenizer,
      contextLength: 2048,
      maxTokens: 4,
      historyItems: 1,
      templateTokensPerItem: 5,
      templateTokensPerCall: 24,
    });
    expect(pieces).toEqual([]);
  });
});

describe("checkTemplateTokens, on the messages before they are converted", () => {
  // Converting parses each call's arguments and each result as JSON, an exception a text that is
  // not: 126,000 empty calls took 0.8 s there.
  it("refuses tens of thousands of tool calls, or of tool results without their calls", () => {
    const bound = { contextLength: 2048, maxTokens: 4, templateTokensPerItem: 5, templateTokensPerCall: 24 };
    expect(() => checkTemplateTokens({ ...bound, messages: emptyCalls(126_000) })).toThrow(
      "you requested more than 3024009 tokens (more than 3024005 in the messages, 4 in the completion)",
    );
    const results: ChatMessage[] = Array.from({ length: 150_000 }, () => ({
      role: "tool",
      toolCallId: "",
      content: "{",
    }));
    expect(() => checkTemplateTokens({ ...bound, messages: results })).toThrow(ContextLengthError);
  });

  it("counts results that answer calls with the calls, once", () => {
    const messages: ChatMessage[] = [
      ...emptyCalls(600),
      ...Array.from({ length: 600 }, () => ({ role: "tool" as const, toolCallId: "", content: "{}" })),
    ];
    // 601 items and calls: under the count above which arithmetic alone refuses.
    expect(() =>
      checkTemplateTokens({ messages, contextLength: 2048, maxTokens: 4, templateTokensPerCall: 24 }),
    ).not.toThrow();
  });
});

describe("documentedToolTexts where the template writes parameter schemas as JSON", () => {
  it("counts each tool's parameters as their compact JSON, and the names and descriptions", () => {
    const parameters = {
      type: "object",
      properties: { p: { oneOf: [{ type: "string" }, { type: "null" }] } },
    };
    const texts = documentedToolTexts([{ name: "t", description: "Does t.", parameters }, { name: "u" }], {
      parametersAsJson: true,
    });
    expect(texts).toEqual(["t", "Does t.", JSON.stringify(parameters), "u"]);
  });
});

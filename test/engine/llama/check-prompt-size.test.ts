import type { Token, Tokenizer } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ContextLengthError } from "../../../src/engine/check-context-length.ts";
import { CHECK_ABOVE_CHARS, checkPromptSize } from "../../../src/engine/llama/check-prompt-size.ts";

/** A tokenizer of `charactersPerToken` characters a token, recording what it was given. */
function countingTokenizer(charactersPerToken: number) {
  const pieces: string[] = [];
  const tokenizer = ((text: string) => {
    pieces.push(text);
    return Array.from({ length: Math.ceil(text.length / charactersPerToken) }, () => 1 as Token);
  }) as Tokenizer;
  return { tokenizer, pieces };
}

describe("checkPromptSize", () => {
  it("leaves messages of ordinary size to the renderer", async () => {
    const { tokenizer, pieces } = countingTokenizer(1);
    await checkPromptSize({
      messages: [{ role: "user", content: "x".repeat(CHECK_ABOVE_CHARS) }],
      tokenizer,
      contextLength: 16,
      maxTokens: undefined,
    });
    expect(pieces).toEqual([]);
  });

  it("refuses megabytes of messages after the first pieces, saying how many tokens at least", async () => {
    const { tokenizer, pieces } = countingTokenizer(4);
    const content = "hello world ".repeat(600_000);
    const refusal = await checkPromptSize({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content },
      ],
      tokenizer,
      contextLength: 1024,
      maxTokens: undefined,
    }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ContextLengthError);
    expect((refusal as ContextLengthError).message).toMatch(
      /^This model's maximum context length is 1024 tokens\. However, your messages resulted in more than \d+ tokens\./,
    );
    expect((refusal as ContextLengthError).requestedTokens).toBeGreaterThan(1024);
    // A piece or two, not 7 MB in one go.
    expect(pieces.reduce((sum, piece) => sum + piece.length, 0)).toBeLessThan(64 * 1024);
    expect(pieces.every((piece) => piece.length <= 16 * 1024)).toBe(true);
  });

  it("lets a large prompt that may fit through to the renderer, counting max_tokens in", async () => {
    // 200,000 characters at 1000 a token: about 200 tokens, less the margins.
    const messages = [{ role: "user" as const, content: "y".repeat(200_000) }];
    const { tokenizer, pieces } = countingTokenizer(1000);
    await checkPromptSize({ messages, tokenizer, contextLength: 1024, maxTokens: 500 });
    expect(pieces.join("")).toBe(messages[0]?.content);
    const refusal = await checkPromptSize({
      messages,
      tokenizer: countingTokenizer(100).tokenizer,
      contextLength: 1024,
      maxTokens: 500,
    }).catch((error: unknown) => error);
    expect((refusal as ContextLengthError).message).toMatch(
      /However, you requested more than \d+ tokens \(more than \d+ in the messages, 500 in the completion\)/,
    );
  });

  it("counts many short messages as much as one long one (regression: each fell under the margin)", async () => {
    // 100,000 messages of 7 tokens each: the margin per piece used to be taken from every message.
    const messages = Array.from({ length: 100_000 }, () => ({
      role: "user" as const,
      content: "a b c d e f g ",
    }));
    const { tokenizer, pieces } = countingTokenizer(2);
    const refusal = await checkPromptSize({
      messages,
      tokenizer,
      contextLength: 1024,
      maxTokens: undefined,
    }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ContextLengthError);
    expect(pieces.length).toBeLessThanOrEqual(2);
  });

  it("never cuts a surrogate pair in two", async () => {
    const { tokenizer, pieces } = countingTokenizer(1_000_000);
    // An emoji straddles the first piece's end.
    const content = `${"a".repeat(16 * 1024 - 1)}😀${"b".repeat(CHECK_ABOVE_CHARS)}`;
    await checkPromptSize({
      messages: [{ role: "user", content }],
      tokenizer,
      contextLength: 1024,
      maxTokens: 1,
    });
    expect(pieces.join("")).toBe(content);
    expect(pieces.every((piece) => !/[\uD800-\uDBFF]$/.test(piece))).toBe(true);
  });

  it("counts a tool result's JSON as the template renders it, compact (regression: indented JSON that fits was refused)", async () => {
    // 100,000 characters as sent, most of them indentation; 26 as the prompt holds them.
    const indented = `{${" ".repeat(99_970)}"status": "shipped", "id": 7}`;
    const messages = [
      { role: "user" as const, content: "Where is my order?" },
      {
        role: "assistant" as const,
        content: null,
        toolCalls: [{ id: "call_1", name: "track", arguments: `{${" ".repeat(70_000)}"order": 7}` }],
      },
      { role: "tool" as const, toolCallId: "call_1", content: indented },
    ];
    await expect(
      checkPromptSize({
        messages,
        tokenizer: countingTokenizer(1).tokenizer,
        contextLength: 2048,
        maxTokens: 100,
      }),
    ).resolves.toBeUndefined();
  });
});

import { describe, expect, it } from "vitest";
import { ChunkRenderer, SSE_DONE } from "../../src/api/sse.ts";
import { AppError } from "../../src/errors/app-error.ts";

const identity = { id: "chatcmpl-1", created: 1_700_000_000, model: "tiny" };

function parseEvents(text: string): unknown[] {
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .split("\n\n")
    .filter((event) => event !== "")
    .map((event) => {
      expect(event.startsWith("data: ")).toBe(true);
      const data = event.slice("data: ".length);
      return data === "[DONE]" ? "[DONE]" : JSON.parse(data);
    });
}

describe("ChunkRenderer", () => {
  it("starts with the assistant role and empty content", () => {
    const [first] = parseEvents(new ChunkRenderer(identity, { includeUsage: false }).start());
    expect(first).toEqual({
      ...identity,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
    });
  });

  it("renders text, then a final chunk with an empty delta, then [DONE]", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: false });
    expect(parseEvents(renderer.part({ type: "text-delta", text: "Hi" }))).toEqual([
      {
        ...identity,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { content: "Hi" }, logprobs: null, finish_reason: null }],
      },
    ]);
    expect(renderer.part({ type: "text-delta", text: "" })).toBe("");
    const end = parseEvents(
      renderer.part({
        type: "finish",
        reason: "length",
        rawReason: "maxTokens",
        usage: { promptTokens: 3, completionTokens: 2 },
      }),
    );
    expect(end).toEqual([
      {
        ...identity,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "length" }],
      },
      "[DONE]",
    ]);
  });

  it("with include_usage puts usage: null on every chunk and a last chunk with choices: [] and the usage", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: true });
    const [first] = parseEvents(renderer.start()) as { usage: unknown }[];
    expect(first?.usage).toBeNull();
    const end = parseEvents(
      renderer.part({
        type: "finish",
        reason: "stop",
        rawReason: undefined,
        usage: { promptTokens: 3, completionTokens: 2 },
      }),
    );
    expect(end).toHaveLength(3);
    expect(end[1]).toEqual({
      ...identity,
      object: "chat.completion.chunk",
      choices: [],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    });
    expect(end[2]).toBe("[DONE]");
  });

  it("renders tool calls as OpenAI deltas: id, type and name first, then argument fragments", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: false });
    const [first] = parseEvents(
      renderer.part({
        type: "tool-call-delta",
        index: 0,
        id: "call_1",
        name: "get_weather",
        argumentsDelta: "",
      }),
    ) as { choices: { delta: unknown }[] }[];
    expect(first?.choices[0]?.delta).toEqual({
      tool_calls: [
        { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } },
      ],
    });
    const [next] = parseEvents(
      renderer.part({ type: "tool-call-delta", index: 0, argumentsDelta: '{"city"' }),
    ) as {
      choices: { delta: unknown }[];
    }[];
    expect(next?.choices[0]?.delta).toEqual({
      tool_calls: [{ index: 0, function: { arguments: '{"city"' } }],
    });
  });

  it("sends an error after the stream started as an error event followed by [DONE]", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: false });
    const text = renderer.part({
      type: "error",
      error: new AppError("internal_error", "generation failed"),
      usage: { promptTokens: 1, completionTokens: 0 },
    });
    expect(text.endsWith(SSE_DONE)).toBe(true);
    expect(parseEvents(text)).toEqual([
      { error: { message: "generation failed", type: "server_error", param: null, code: "internal_error" } },
      "[DONE]",
    ]);
  });

  it("renders a batch of parts as the events of each, in order, in one text", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: false });
    const finish = {
      type: "finish",
      reason: "stop",
      rawReason: "stop",
      usage: { promptTokens: 3, completionTokens: 2 },
    } as const;
    const batch = [
      { type: "text-delta", text: "Hel" },
      { type: "text-delta", text: "" },
      { type: "text-delta", text: "lo" },
      finish,
    ] as const;
    expect(renderer.parts(batch)).toBe(batch.map((part) => renderer.part(part)).join(""));
    expect(parseEvents(renderer.parts(batch))).toHaveLength(4);
    expect(renderer.parts([{ type: "text-delta", text: "x" }])).toBe(
      renderer.part({ type: "text-delta", text: "x" }),
    );
  });

  it("sends the error that cut a run in place of its finish", () => {
    const renderer = new ChunkRenderer(identity, { includeUsage: true });
    const cut = new AppError("model_unavailable", "The server is shutting down.");
    const events = parseEvents(
      renderer.parts(
        [
          { type: "text-delta", text: "Hi" },
          {
            type: "finish",
            reason: "stop",
            rawReason: "abort",
            usage: { promptTokens: 3, completionTokens: 1 },
          },
        ],
        cut,
      ),
    ) as { choices?: { delta: unknown }[]; error?: { code: string } }[];
    expect(events[0]?.choices?.[0]?.delta).toEqual({ content: "Hi" });
    expect(events[1]?.error?.code).toBe("model_unavailable");
    expect(events[2]).toBe("[DONE]");
    expect(events).toHaveLength(3);
  });
});

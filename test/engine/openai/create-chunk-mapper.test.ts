import { describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { convertCompletionToChunk } from "../../../src/engine/openai/convert-completion-to-chunk.ts";
import { createChunkMapper } from "../../../src/engine/openai/create-chunk-mapper.ts";
import { chunk, toolCallCompletion, usageChunk } from "./mock-upstream.ts";

function toolDelta(call: Record<string, unknown>) {
  return chunk({ tool_calls: [call] });
}

/** Each call's arguments as a client that joins the fragments by index gets them. */
function argumentsByIndex(parts: readonly StreamPart[]): string[] {
  const joined: string[] = [];
  for (const part of parts)
    if (part.type === "tool-call-delta")
      joined[part.index] = (joined[part.index] ?? "") + part.argumentsDelta;
  return joined;
}

/** The indices of the tool-call deltas, in the order they went out. */
function indexOrder(parts: readonly StreamPart[]): number[] {
  return parts.flatMap((part) => (part.type === "tool-call-delta" ? [part.index] : []));
}

function readAll(chunks: readonly unknown[], options: { logprobs?: boolean } = {}) {
  const mapper = createChunkMapper([], [], undefined, options.logprobs ?? false);
  const parts: StreamPart[] = [];
  for (const value of chunks) mapper.read(value, parts);
  mapper.flush(parts);
  return { mapper, parts };
}

describe("createChunkMapper", () => {
  it("passes text through and keeps the finish reason and usage", () => {
    const { mapper, parts } = readAll([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }),
      chunk({}, "stop"),
      usageChunk(9, 2),
    ]);
    expect(parts).toEqual([
      { type: "text-delta", text: "Hel" },
      { type: "text-delta", text: "lo" },
    ]);
    expect(mapper.rawFinishReason).toBe("stop");
    expect(mapper.reportedUsage).toEqual({ promptTokens: 9, completionTokens: 2 });
    expect(mapper.calledTools).toBe(false);
  });

  it("re-assembles OpenAI's streamed tool calls: id and name first, then argument fragments", () => {
    const { parts, mapper } = readAll([
      toolDelta({ index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } }),
      toolDelta({ index: 0, function: { arguments: '{"x"' } }),
      toolDelta({ index: 0, function: { arguments: ":1}" } }),
      toolDelta({ index: 1, id: "call_b", type: "function", function: { name: "g", arguments: "{}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "f", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"x"' },
      { type: "tool-call-delta", index: 0, argumentsDelta: ":1}" },
      // The first delta of a call never carries arguments (SPEC section 4), even sent together.
      { type: "tool-call-delta", index: 1, id: "call_b", name: "g", argumentsDelta: "" },
      { type: "tool-call-delta", index: 1, argumentsDelta: "{}" },
    ]);
    expect(mapper.calledTools).toBe(true);
  });

  // Regression: a name in pieces reached the client as its first piece, a tool it has not got.
  it("joins a name sent in pieces, repeated or growing, and sends the call once its arguments begin", () => {
    const names = (sent: readonly unknown[][]) =>
      readAll(sent.map((pieces) => toolDelta({ index: 0, function: pieces[0] }))).parts.flatMap((part) =>
        part.type === "tool-call-delta" && part.name !== undefined ? [part.name] : [],
      );
    const args = { arguments: '{"city":"Oslo"}' };
    expect(names([[{ name: "get_" }], [{ name: "weather" }], [args]])).toEqual(["get_weather"]);
    expect(names([[{ name: "get_weather" }], [{ name: "get_weather", ...args }]])).toEqual(["get_weather"]);
    expect(names([[{ name: "get" }], [{ name: "get_wea" }], [{ name: "get_weather" }], [args]])).toEqual([
      "get_weather",
    ]);
    // A call with no arguments is whole when the answer ends.
    expect(names([[{ name: "get_" }], [{ name: "time" }]])).toEqual(["get_time"]);
    // Pieces after arguments began, or beside white space only (found by an explorer: `get_`).
    expect(
      names([[{ arguments: '{"a":' }], [{ name: "get_" }], [{ name: "weather", arguments: "1}" }]]),
    ).toEqual(["get_weather"]);
    expect(names([[{ arguments: '{"a":1}' }], [{ name: "get_" }], [{ name: "weather" }]])).toEqual([
      "get_weather",
    ]);
    expect(names([[{ name: "get_", arguments: " " }], [{ name: "weather" }], [args]])).toEqual([
      "get_weather",
    ]);

    // Chunk by chunk: nothing of the call goes out before its name is whole.
    const mapper = createChunkMapper([]);
    const parts: StreamPart[] = [];
    mapper.read(toolDelta({ index: 0, id: "call_a", type: "function", function: { name: "get_" } }), parts);
    mapper.read(toolDelta({ index: 0, function: { name: "weather" } }), parts);
    expect(parts).toEqual([]);
    mapper.read(toolDelta({ index: 0, function: args }), parts);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "get_weather", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"city":"Oslo"}' },
    ]);
    expect(mapper.estimateCompletionTokens()).toBeGreaterThan(0);
  });

  it("holds back fragments that come before the name, and makes up a missing id", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, function: { arguments: '{"x":' } }),
      toolDelta({ index: 0, function: { name: "f", arguments: "1}" } }),
    ]);
    expect(parts).toEqual([
      {
        type: "tool-call-delta",
        index: 0,
        id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
        name: "f",
        argumentsDelta: "",
      },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"x":1}' },
    ]);
  });

  it("reads whole calls sent one after another at index 0 as separate calls", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: "{}" } }),
      toolDelta({ index: 0, id: "call_b", function: { name: "g", arguments: '{"y":2}' } }),
    ]);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "f", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: "{}" },
      { type: "tool-call-delta", index: 1, id: "call_b", name: "g", argumentsDelta: "" },
      { type: "tool-call-delta", index: 1, argumentsDelta: '{"y":2}' },
    ]);
  });

  it("continues the last call when an upstream leaves out the index", () => {
    const { parts } = readAll([
      toolDelta({ id: "call_a", function: { name: "f", arguments: '{"a"' } }),
      toolDelta({ function: { arguments: ":1}" } }),
    ]);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "f", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"a"' },
      { type: "tool-call-delta", index: 0, argumentsDelta: ":1}" },
    ]);
  });

  it("writes arguments sent as a JSON object as their JSON text", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, id: "call_o", function: { name: "f", arguments: { a: 1 } } }),
    ]);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_o", name: "f", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"a":1}' },
    ]);
  });

  it("returns the upstream's error for error events", () => {
    const mapper = createChunkMapper([]);
    const parts: StreamPart[] = [];
    expect(mapper.read({ error: { message: "overloaded", type: "server_error" } }, parts)?.message).toBe(
      "overloaded",
    );
    expect(mapper.read({ message: "bad" }, parts, "error")?.message).toBe("bad");
    expect(parts).toEqual([]);
  });

  it("ignores choices other than the first, and chunks and choices that are not objects", () => {
    const { parts } = readAll([
      { choices: [{ index: 1, delta: { content: "other" } }] },
      "nonsense",
      { choices: [{ index: 0, delta: null }] },
      { choices: [null, "nonsense", 7] },
      { choices: [{ index: 0, delta: { content: "kept" } }] },
    ]);
    expect(parts).toEqual([{ type: "text-delta", text: "kept" }]);
  });

  it("estimates completion tokens from the text and the calls", () => {
    const { mapper } = readAll([
      chunk({ content: "The quick brown fox jumps over the lazy dog." }),
      toolDelta({ index: 0, id: "call_a", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }),
    ]);
    expect(mapper.estimateCompletionTokens()).toBeGreaterThanOrEqual(15);
    expect(mapper.estimateCompletionTokens()).toBeLessThanOrEqual(25);
  });

  it("reads content sent as a list of typed parts: text parts are the answer, thinking parts reasoning (regression: dropped, yet billed)", () => {
    const { parts, mapper } = readAll([
      chunk({
        role: "assistant",
        content: [{ type: "thinking", thinking: [{ type: "text", text: "Hmm, France." }] }],
      }),
      chunk({ content: [{ type: "text", text: "Par" }] }),
      chunk({
        content: [
          { type: "text", text: "is" },
          { type: "image_url", image_url: { url: "x" } },
        ],
      }),
      chunk({}, "stop"),
    ]);
    expect(parts).toEqual([
      { type: "text-delta", text: "Par" },
      { type: "text-delta", text: "is" },
    ]);
    // The thinking is not sent, but counts where tokens are estimated.
    expect(mapper.estimateCompletionTokens()).toBeGreaterThan(1 + 1);
  });

  it("counts reasoning deltas (reasoning_content, reasoning) in the estimate, never sending them (regression: a client that left during the reasoning paid 0)", () => {
    const thinking = "Let me think about this carefully step by step before answering. ".repeat(20);
    for (const field of ["reasoning_content", "reasoning"]) {
      const { parts, mapper } = readAll([chunk({ role: "assistant", content: "", [field]: thinking })]);
      expect(parts).toEqual([]);
      expect(mapper.estimateCompletionTokens()).toBeGreaterThan(200);
      expect(mapper.producedLength).toBe(thinking.length);
    }
  });

  it("reads Groq's usage in x_groq where the chunk has none of its own (regression: estimated)", () => {
    const groq = {
      ...chunk({}, "stop"),
      x_groq: { id: "req_1", usage: { prompt_tokens: 20, completion_tokens: 3 } },
    };
    expect(readAll([chunk({ content: "Hi" }), groq]).mapper.reportedUsage).toEqual({
      promptTokens: 20,
      completionTokens: 3,
    });
    // The top level's, where both come.
    const both = { ...groq, usage: { prompt_tokens: 21, completion_tokens: 4 } };
    expect(readAll([both]).mapper.reportedUsage).toEqual({ promptTokens: 21, completionTokens: 4 });
    expect(readAll([{ ...chunk({}), x_groq: { id: "req_1" } }]).mapper.reportedUsage).toBeUndefined();
  });

  it("counts reasoning sent under both names once (regression: vLLM's and mlx-vlm's alias counted twice)", () => {
    const thinking = "Let me think about this carefully step by step before answering. ".repeat(20);
    const { mapper } = readAll([chunk({ reasoning_content: thinking, reasoning: thinking })]);
    expect(mapper.producedLength).toBe(thinking.length);
    expect(mapper.reasoningBytes).toBe(thinking.length);
    // An empty one is no reasoning: the other is read.
    expect(readAll([chunk({ reasoning_content: "", reasoning: thinking })]).mapper.producedLength).toBe(
      thinking.length,
    );
  });

  it("keeps interleaved tool calls apart whose indexes are strings, ids in their first deltas only (regression: their arguments mixed)", () => {
    const { parts } = readAll([
      toolDelta({ index: "0", id: "call_a", function: { name: "f", arguments: "" } }),
      toolDelta({ index: "1", id: "call_b", function: { name: "g", arguments: "" } }),
      toolDelta({ index: "0", function: { arguments: '{"a":' } }),
      toolDelta({ index: "1", function: { arguments: '{"b":' } }),
      toolDelta({ index: "0", function: { arguments: "1}" } }),
      toolDelta({ index: "1", function: { arguments: "2}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(argumentsByIndex(parts)).toEqual(['{"a":1}', '{"b":2}']);
  });

  it("reads choice 0 with its index as a string, and a choice sent bare (regression: its text charged, never sent)", () => {
    const { parts } = readAll([
      chunk({ content: "A" }),
      { ...chunk({}), choices: [{ index: "0", delta: { content: "B" } }] },
      { ...chunk({}), choices: { index: 0, delta: { content: "C" } } },
      { ...chunk({}), choices: [{ index: 1, delta: { content: "not ours" } }] },
      chunk({ content: "D" }, "stop"),
    ]);
    expect(parts.flatMap((part) => (part.type === "text-delta" ? [part.text] : []))).toEqual([
      "A",
      "B",
      "C",
      "D",
    ]);
  });

  it("tells of usage past the bounds as the last report stands (regression: an early report logged as charged at the bound)", () => {
    const mapper = createChunkMapper([], [], {
      promptTokens: 100,
      completionTokens: 3,
      completionSent: true,
    });
    const parts: StreamPart[] = [];
    mapper.read(
      { ...chunk({ role: "assistant" }), usage: { prompt_tokens: 5, completion_tokens: 10 } },
      parts,
    );
    expect(mapper.usageBeyondBounds).toEqual({ completionTokens: 10 });
    // Reasoning since: 3 tokens and its bytes may be charged, and the same report falls within.
    mapper.read(chunk({ reasoning_content: "a long enough chain of thought" }), parts);
    mapper.read({ ...chunk({}, "stop"), usage: { prompt_tokens: 5, completion_tokens: 10 } }, parts);
    expect(mapper.usageBeyondBounds).toBeUndefined();
    expect(mapper.reportedUsage).toMatchObject({ promptTokens: 5, completionTokens: 10 });
  });

  it("counts a name sent again in every delta once (regression: a call within max_tokens counted 65 bytes a character and cut)", () => {
    const name = "n".repeat(64);
    const args = JSON.stringify({ text: "a".repeat(390) });
    const { mapper, parts } = readAll([
      ...[...args].map((character) =>
        toolDelta({ index: 0, id: "call_0", type: "function", function: { name, arguments: character } }),
      ),
      chunk({}, "tool_calls"),
    ]);
    expect(argumentsByIndex(parts)).toEqual([args]);
    expect(mapper.producedBytes).toBe(name.length + args.length);
    expect(mapper.producedLength).toBe(name.length + args.length);
    // A name sent in pieces counts each piece once.
    const pieces = readAll([
      toolDelta({ index: 0, id: "call_0", type: "function", function: { name: "get_" } }),
      toolDelta({ index: 0, function: { name: "weather" } }),
      toolDelta({ index: 0, function: { name: "get_weather", arguments: "{}" } }),
    ]);
    expect(pieces.mapper.producedBytes).toBe("get_weather{}".length);
  });

  it("keeps whole calls apart when they carry neither index nor id (regression: merged into one call, arguments run together)", () => {
    const { parts } = readAll([
      chunk({
        tool_calls: [
          { id: "", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { type: "function", function: { name: "get_time", arguments: '{"tz":"CET"}' } },
        ],
      }),
      toolDelta({ function: { name: "get_news", arguments: "{}" } }),
      chunk({}, "tool_calls"),
    ]);
    const started = parts.filter((part) => part.type === "tool-call-delta" && part.name !== undefined);
    expect(started.map((part) => (part.type === "tool-call-delta" ? [part.index, part.name] : []))).toEqual([
      [0, "get_weather"],
      [1, "get_time"],
      [2, "get_news"],
    ]);
    const argumentsOf = (index: number) =>
      parts
        .filter((part) => part.type === "tool-call-delta" && part.index === index)
        .map((part) => (part.type === "tool-call-delta" ? part.argumentsDelta : ""))
        .join("");
    expect([argumentsOf(0), argumentsOf(1), argumentsOf(2)]).toEqual([
      '{"city":"Paris"}',
      '{"tz":"CET"}',
      "{}",
    ]);
  });

  it("keeps a call whose name comes again in every delta whole when it carries neither index nor id (regression: a call a character)", () => {
    const args = JSON.stringify({ q: "z".repeat(300), note: 'a "}" in a string' });
    for (const firstId of [undefined, "call_x"]) {
      const { parts, mapper } = readAll([
        ...[...args].map((character, position) =>
          toolDelta({
            ...(position === 0 && firstId !== undefined ? { id: firstId } : {}),
            type: "function",
            function: { name: "lookup", arguments: character },
          }),
        ),
        // The name again with nothing, or white space, after the whole arguments: the same call.
        toolDelta({ type: "function", function: { name: "lookup", arguments: "" } }),
        toolDelta({ type: "function", function: { name: "lookup", arguments: "\n" } }),
        // The same function again, whole: the next call.
        toolDelta({ type: "function", function: { name: "lookup", arguments: "{}" } }),
        chunk({}, "tool_calls"),
      ]);
      expect(argumentsByIndex(parts)).toEqual([`${args}\n`, "{}"]);
      expect(mapper.producedBytes).toBe(2 * "lookup".length + args.length + 1 + 2);
    }
  });

  it("makes no call of an entry that carries nothing (Gemini's lone thought signatures)", () => {
    const { parts } = readAll([
      toolDelta({ extra_content: { google: { thought_signature: "abc" } } }),
      toolDelta({ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(parts.filter((part) => part.type === "tool-call-delta" && part.name !== undefined)).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_1", name: "get_weather", argumentsDelta: "" },
    ]);
  });
  it("merges usage reports count by count (regression: a final partial report replaced the earlier prompt count)", () => {
    const { mapper } = readAll([
      { ...chunk({ role: "assistant", content: "" }), usage: { prompt_tokens: 1000, completion_tokens: 0 } },
      chunk({ content: "Hello world" }),
      chunk({}, "stop"),
      { ...usageChunk(0, 0), usage: { completion_tokens: 2 } },
    ]);
    expect(mapper.reportedUsage).toEqual({ promptTokens: 1000, completionTokens: 2 });
    expect(mapper.usageCoversOutput).toBe(true);
  });

  it("knows whether output came after the last usage report (regression: an early report taken as final)", () => {
    const early = {
      ...chunk({ role: "assistant", content: "" }),
      usage: { prompt_tokens: 10, completion_tokens: 0 },
    };
    expect(readAll([]).mapper.usageCoversOutput).toBe(false);
    expect(readAll([early]).mapper.usageCoversOutput).toBe(true);
    expect(readAll([early, chunk({ content: "Hi" })]).mapper.usageCoversOutput).toBe(false);
    expect(readAll([early, chunk({ reasoning_content: "Hmm" })]).mapper.usageCoversOutput).toBe(false);
    expect(
      readAll([early, toolDelta({ index: 0, id: "call_1", function: { name: "f", arguments: "{}" } })]).mapper
        .usageCoversOutput,
    ).toBe(false);
    // A report in the chunk that carries output counts it (vLLM's continuous usage).
    const withText = { ...chunk({ content: "Hi" }), usage: { prompt_tokens: 10, completion_tokens: 1 } };
    expect(readAll([early, withText]).mapper.usageCoversOutput).toBe(true);
    expect(readAll([early, chunk({ content: "Hi" }), usageChunk(10, 1)]).mapper.usageCoversOutput).toBe(true);
  });

  it('ends a streamed call whose arguments are empty, missing or null with {} (regression: a no-parameter call came out with arguments "")', () => {
    for (const fn of [{ name: "now", arguments: "" }, { name: "now" }, { name: "now", arguments: null }]) {
      const { parts } = readAll([
        toolDelta({ index: 0, id: "call_n", type: "function", function: fn }),
        toolDelta({ index: 0, function: {} }),
        chunk({}, "tool_calls"),
      ]);
      expect(parts).toEqual([
        { type: "tool-call-delta", index: 0, id: "call_n", name: "now", argumentsDelta: "" },
        { type: "tool-call-delta", index: 0, argumentsDelta: "{}" },
      ]);
    }
  });

  it("ends a call of a whole completion whose arguments are empty, missing or null with {}", () => {
    for (const fn of [{ name: "now", arguments: "" }, { name: "now" }, { name: "now", arguments: null }]) {
      const whole = toolCallCompletion(fn);
      expect(argumentsByIndex(readAll([convertCompletionToChunk(whole)]).parts)).toEqual(["{}"]);
    }
  });

  it("adds {} after arguments that are only white space, and leaves other arguments as they came", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: " \n" } }),
      toolDelta({ index: 1, id: "call_b", function: { name: "g", arguments: '{"a":' } }),
      toolDelta({ index: 2, id: "call_c", function: { name: "h", arguments: "not json" } }),
    ]);
    expect(argumentsByIndex(parts)).toEqual([" \n{}", '{"a":', "not json"]);
  });

  it("sends parallel calls that an upstream interleaves one after another (regression: passed on interleaved, the SDK's helpers broke)", () => {
    const { parts } = readAll([
      chunk({
        tool_calls: [
          { index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } },
          { index: 1, id: "call_b", type: "function", function: { name: "g", arguments: "" } },
        ],
      }),
      chunk({
        tool_calls: [
          { index: 0, function: { arguments: '{"a":' } },
          { index: 1, function: { arguments: '{"b":' } },
        ],
      }),
      toolDelta({ index: 0, function: { arguments: "1}" } }),
      toolDelta({ index: 1, function: { arguments: "2}" } }),
      toolDelta({ index: 2, id: "call_c", type: "function", function: { name: "h", arguments: '{"c":3}' } }),
      toolDelta({ index: 0, function: {} }),
      chunk({}, "tool_calls"),
    ]);
    expect(parts).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "f", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"a":' },
      { type: "tool-call-delta", index: 0, argumentsDelta: "1}" },
      { type: "tool-call-delta", index: 1, id: "call_b", name: "g", argumentsDelta: "" },
      { type: "tool-call-delta", index: 1, argumentsDelta: '{"b":2}' },
      { type: "tool-call-delta", index: 2, id: "call_c", name: "h", argumentsDelta: "" },
      { type: "tool-call-delta", index: 2, argumentsDelta: '{"c":3}' },
    ]);
  });

  it("holds an interleaved call back until the end, with a name that came late and a made-up id", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: '{"a":' } }),
      toolDelta({ index: 1, function: { arguments: '{"b":2}' } }),
      toolDelta({ index: 1, function: { name: "g" } }),
      toolDelta({ index: 0, function: { arguments: "1}" } }),
      toolDelta({ index: 2, id: "call_c", function: { name: "now" } }),
    ]);
    expect(indexOrder(parts)).toEqual([0, 0, 0, 1, 1, 2, 2]);
    expect(parts[3]).toEqual({
      type: "tool-call-delta",
      index: 1,
      id: expect.stringMatching(/^call_/),
      name: "g",
      argumentsDelta: "",
    });
    expect(argumentsByIndex(parts)).toEqual(['{"a":1}', '{"b":2}', "{}"]);
  });

  it("sends calls that come one after another as they come", () => {
    const mapper = createChunkMapper([]);
    const parts: StreamPart[] = [];
    mapper.read(toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: '{"a":1}' } }), parts);
    mapper.read(toolDelta({ index: 1, id: "call_b", function: { name: "g", arguments: '{"b":' } }), parts);
    mapper.read(toolDelta({ index: 1, function: { arguments: "2}" } }), parts);
    expect(indexOrder(parts)).toEqual([0, 0, 1, 1, 1]);
    mapper.flush(parts);
    expect(argumentsByIndex(parts)).toEqual(['{"a":1}', '{"b":2}']);
    expect(parts).toHaveLength(5);
  });
});

describe("createChunkMapper with a character split between two deltas as surrogate halves", () => {
  const EMOJI = "\u{1F600}";
  const [HIGH, LOW] = [EMOJI.slice(0, 1), EMOJI.slice(1)];
  const REPLACEMENT = "\uFFFD";

  /** The text of each part that carries some, in order. */
  function sentTexts(parts: readonly StreamPart[]): string[] {
    return parts.flatMap((part) =>
      part.type === "tool-call-delta" ? [part.argumentsDelta] : "text" in part ? [part.text] : [],
    );
  }

  it("sends no lone half of a text or refusal, and the same text and estimate as unsplit (regression: a half per event, which no client decodes as UTF-8)", () => {
    for (const field of ["content", "refusal"]) {
      const split = readAll([
        chunk({ [field]: `X${HIGH}` }),
        chunk({ [field]: `${LOW}Y${HIGH}` }),
        chunk({ [field]: LOW }),
        chunk({}, "stop"),
      ]);
      const whole = readAll([chunk({ [field]: `X${EMOJI}Y${EMOJI}` }), chunk({}, "stop")]);
      expect(sentTexts(split.parts)).toEqual(["X", `${EMOJI}Y`, EMOJI]);
      expect(sentTexts(split.parts).every((text) => text.isWellFormed())).toBe(true);
      expect(split.mapper.estimateCompletionTokens()).toBe(whole.mapper.estimateCompletionTokens());
      expect(split.mapper.producedLength).toBe(whole.mapper.producedLength);
    }
  });

  it("sends a high half that no low one follows, at the end or before the end of a broken answer, as U+FFFD (regression: sent as it was, which a client's UTF-8 encoder fails on)", () => {
    expect(readAll([chunk({ content: `X${HIGH}` })]).parts).toEqual([
      { type: "text-delta", text: "X" },
      { type: "text-delta", text: REPLACEMENT },
    ]);
    expect(readAll([chunk({ content: HIGH }), chunk({ content: HIGH })]).parts).toEqual([
      { type: "text-delta", text: REPLACEMENT },
      { type: "text-delta", text: REPLACEMENT },
    ]);
    // Held text goes out before the tool calls still owed.
    const mapper = createChunkMapper([]);
    const parts: StreamPart[] = [];
    mapper.read(chunk({ refusal: `no${HIGH}` }), parts);
    mapper.read(toolDelta({ index: 0, function: { arguments: `{"a":"${HIGH}` } }), parts);
    expect(parts).toEqual([{ type: "refusal-delta", text: "no" }]);
    mapper.flush(parts);
    expect(parts.slice(1)).toEqual([
      { type: "refusal-delta", text: REPLACEMENT },
      {
        type: "tool-call-delta",
        index: 0,
        id: expect.stringMatching(/^call_/),
        name: "",
        argumentsDelta: "",
      },
      { type: "tool-call-delta", index: 0, argumentsDelta: `{"a":"` },
      { type: "tool-call-delta", index: 0, argumentsDelta: REPLACEMENT },
    ]);
  });

  it("sends a lone half inside one delta as U+FFFD, in text, refusals, a call's id, name and arguments, and log probabilities (regression: passed on as `\\ud800`)", () => {
    const { parts } = readAll(
      [
        {
          choices: [
            {
              index: 0,
              delta: { content: `a${LOW}b${HIGH}c` },
              logprobs: { content: [{ token: `t${HIGH}`, logprob: -1, bytes: null, top_logprobs: [] }] },
            },
          ],
        },
        chunk({ refusal: `${HIGH}r` }),
        toolDelta({
          index: 0,
          id: `call_${LOW}`,
          function: { name: `f${HIGH}g`, arguments: `{"a":"${LOW}x"}` },
        }),
        chunk({}, "tool_calls"),
      ],
      { logprobs: true },
    );
    const strings = JSON.stringify(parts);
    expect(strings).not.toMatch(/\\ud[89a-f]/);
    expect(parts[0]).toMatchObject({
      type: "text-delta",
      text: `a${REPLACEMENT}b${REPLACEMENT}c`,
      logprobs: { content: [{ token: `t${REPLACEMENT}` }] },
    });
    expect(parts).toContainEqual({ type: "refusal-delta", text: `${REPLACEMENT}r` });
    expect(parts).toContainEqual({
      type: "tool-call-delta",
      index: 0,
      id: `call_${REPLACEMENT}`,
      name: `f${REPLACEMENT}g`,
      argumentsDelta: "",
    });
    expect(argumentsByIndex(parts)).toEqual([`{"a":"${REPLACEMENT}x"}`]);
  });

  it("joins the halves of a call's arguments, per call, held before the name or not", () => {
    const { parts, mapper } = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: `{"a":"${HIGH}` } }),
      toolDelta({ index: 0, function: { arguments: `${LOW}"}` } }),
      // Held until the name comes and arguments follow it (the name may come in pieces till then).
      toolDelta({ index: 1, id: "call_b", function: { arguments: `{"b":"${HIGH}` } }),
      toolDelta({ index: 1, function: { name: "g" } }),
      toolDelta({ index: 1, function: { arguments: `${LOW}"}` } }),
      chunk({}, "tool_calls"),
    ]);
    const fragments = parts.map((part) => (part.type === "tool-call-delta" ? part.argumentsDelta : ""));
    expect(fragments.every((text) => text.isWellFormed())).toBe(true);
    expect(argumentsByIndex(parts)).toEqual([`{"a":"${EMOJI}"}`, `{"b":"${EMOJI}"}`]);
    expect(indexOrder(parts)).toEqual([0, 0, 0, 1, 1]);
    const whole = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: `{"a":"${EMOJI}"}` } }),
      toolDelta({ index: 1, id: "call_b", function: { name: "g", arguments: `{"b":"${EMOJI}"}` } }),
    ]);
    expect(mapper.estimateCompletionTokens()).toBe(whole.mapper.estimateCompletionTokens());
  });

  it("keeps each call's half to itself, and sends at the end a half held by a call that is over", () => {
    const { parts } = readAll([
      toolDelta({ index: 0, id: "call_a", function: { name: "f", arguments: "{}" } }),
      toolDelta({ index: 1, id: "call_b", function: { name: "g", arguments: `{"b":"${HIGH}` } }),
      // Text after a call's whole JSON, which no upstream should send: passed on all the same.
      toolDelta({ index: 0, function: { arguments: `x${HIGH}` } }),
      toolDelta({ index: 1, function: { arguments: `${LOW}"}` } }),
    ]);
    expect(argumentsByIndex(parts)).toEqual([`{}x${REPLACEMENT}`, `{"b":"${EMOJI}"}`]);
    expect(parts.at(-1)).toEqual({ type: "tool-call-delta", index: 0, argumentsDelta: REPLACEMENT });
  });
});

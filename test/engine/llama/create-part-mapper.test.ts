import { describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { createPartMapper, type PartMapper } from "../../../src/engine/llama/create-part-mapper.ts";
import { type LlamaStopReason, mapStopReason } from "../../../src/engine/llama/map-finish.ts";

type EndResult = Parameters<PartMapper["onEnd"]>[0];

function collect() {
  const parts: StreamPart[] = [];
  return { parts, emit: (part: StreamPart) => parts.push(part) };
}

describe("createPartMapper", () => {
  it("streams function-call parameters cut to their JSON value, then calls that never streamed", () => {
    const { parts, emit } = collect();
    const mapper = createPartMapper({ kind: "functions", functions: { f: {}, g: {} } }, emit);
    mapper.onText("Let me check.");
    mapper.onFunctionCallParams({ callIndex: 0, functionName: "f", paramsChunk: '{"a"', done: false });
    mapper.onFunctionCallParams({
      callIndex: 0,
      functionName: "f",
      paramsChunk: ": 1}}\n</tool_call>",
      done: true,
    });
    mapper.onEnd({
      functionCalls: [
        { functionName: "f", params: { a: 1 }, raw: [] },
        { functionName: "g", params: {}, raw: [] },
      ],
    } as unknown as EndResult);
    expect(parts).toEqual([
      { type: "text-delta", text: "Let me check." },
      {
        type: "tool-call-delta",
        index: 0,
        id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
        name: "f",
        argumentsDelta: "",
      },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"a"' },
      { type: "tool-call-delta", index: 0, argumentsDelta: ": 1}" },
      {
        type: "tool-call-delta",
        index: 1,
        id: expect.stringMatching(/^call_/),
        name: "g",
        argumentsDelta: "",
      },
      { type: "tool-call-delta", index: 1, argumentsDelta: "{}" },
    ]);
  });

  it("streams a forced call's text as the arguments of the named function", () => {
    const { parts, emit } = collect();
    const mapper = createPartMapper(
      { kind: "tool-arguments", toolName: "f", schema: { type: "object" } },
      emit,
    );
    for (const chunk of ["{", '"x": ', "2}", "\n\n"]) mapper.onText(chunk);
    expect(parts.map((part) => (part.type === "tool-call-delta" ? part.argumentsDelta : ""))).toEqual([
      "",
      "{",
      '"x": ',
      "2}",
    ]);
    expect(parts[0]).toMatchObject({ index: 0, name: "f", id: expect.stringMatching(/^call_/) });
  });

  it("reads the name from the envelope before streaming its arguments", () => {
    const { parts, emit } = collect();
    const mapper = createPartMapper({ kind: "tool-envelope", schema: { type: "object" } }, emit);
    // The name closes in the same chunk as the arguments start: the name's delta comes first.
    for (const chunk of ['{"na', 'me": "g', '", "arguments": {"z"', ": null}}"]) mapper.onText(chunk);
    expect(parts).toEqual([
      {
        type: "tool-call-delta",
        index: 0,
        id: expect.stringMatching(/^call_/),
        name: "g",
        argumentsDelta: "",
      },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"z"' },
      { type: "tool-call-delta", index: 0, argumentsDelta: ": null}" },
    ]);
  });

  // SPEC §4: the first delta of each index carries id, type, name and `arguments: ""`.
  it.each([
    {
      name: "a forced call (named, or required with one tool)",
      plan: { kind: "tool-arguments", toolName: "f", schema: { type: "object" } },
      feed: (mapper: PartMapper) => mapper.onText('{"'),
    },
    {
      name: "a required call among several tools",
      plan: { kind: "tool-envelope", schema: { type: "object" } },
      feed: (mapper: PartMapper) => mapper.onText('{"name": "f", "arguments": {"'),
    },
    {
      name: "a call LlamaChat streamed (auto)",
      plan: { kind: "functions", functions: { f: {} } },
      feed: (mapper: PartMapper) =>
        mapper.onFunctionCallParams({ callIndex: 0, functionName: "f", paramsChunk: '{"a": 1}', done: true }),
    },
    {
      name: "a call LlamaChat never streamed (auto, no parameters)",
      plan: { kind: "functions", functions: { f: {} } },
      feed: (mapper: PartMapper) =>
        mapper.onEnd({
          functionCalls: [{ functionName: "f", params: undefined, raw: [] }],
        } as unknown as EndResult),
    },
  ] as const)("starts $name with a delta whose arguments are empty", ({ plan, feed }) => {
    const { parts, emit } = collect();
    feed(createPartMapper(plan, emit));
    const [first, ...rest] = parts;
    expect(first).toEqual({
      type: "tool-call-delta",
      index: 0,
      id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
      name: "f",
      argumentsDelta: "",
    });
    expect(rest.length).toBeGreaterThan(0);
    for (const part of rest) {
      expect(part).toMatchObject({ type: "tool-call-delta", index: 0 });
      expect(part).not.toHaveProperty("id");
      expect(part).not.toHaveProperty("name");
      expect(part.type === "tool-call-delta" && part.argumentsDelta).not.toBe("");
    }
  });
});

describe("mapStopReason", () => {
  const usage = { promptTokens: 3, completionTokens: 4 };
  const finish = (plan: Parameters<typeof mapStopReason>[0]["plan"], stopReason: string, calls = 0) =>
    mapStopReason({
      plan,
      stopReason: stopReason as LlamaStopReason,
      calledFunctions: calls > 0,
      usage,
    });

  it("maps node-llama-cpp stop reasons and keeps the raw one", () => {
    expect(finish({ kind: "text" }, "eogToken")).toEqual({
      type: "finish",
      reason: "stop",
      rawReason: "eogToken",
      usage,
    });
    expect(finish({ kind: "text" }, "customStopTrigger")).toMatchObject({ reason: "stop" });
    expect(finish({ kind: "text" }, "maxTokens")).toMatchObject({ reason: "length" });
    expect(finish({ kind: "text" }, "abort")).toMatchObject({ reason: "stop", rawReason: "abort" });
    expect(finish({ kind: "functions", functions: {} }, "functionCalls", 1)).toMatchObject({
      reason: "tool_calls",
    });
  });

  it("ends forced calls with tool_calls unless cut by the token limit", () => {
    const plan = { kind: "tool-arguments", toolName: "f", schema: { type: "object" } } as const;
    expect(finish(plan, "stopGenerationTrigger")).toMatchObject({ reason: "tool_calls" });
    expect(finish(plan, "maxTokens")).toMatchObject({ reason: "length" });
  });
});

import { describe, expect, it } from "vitest";
import { isFailureFinishReason, mapFinishReason } from "../../../src/engine/openai/map-finish-reason.ts";

describe("mapFinishReason", () => {
  it.each([
    ["stop", "stop"],
    ["length", "length"],
    // Without a call read: the client must not look for calls that are not there.
    ["tool_calls", "stop"],
    ["function_call", "stop"],
    ["content_filter", "content_filter"],
    ["eos", "stop"],
    ["eos_token", "stop"],
    ["end_turn", "stop"],
    ["max_tokens", "length"],
    ["tool_use", "stop"],
    ["something_new", "other"],
    [undefined, "other"],
  ] as const)("maps %s to %s", (raw, unified) => {
    expect(mapFinishReason(raw, { calledTools: false })).toBe(unified);
  });

  it("finishes a response that called tools with tool_calls even where the upstream says stop", () => {
    expect(mapFinishReason("stop", { calledTools: true })).toBe("tool_calls");
    for (const raw of ["tool_calls", "function_call", "tool_use"])
      expect(mapFinishReason(raw, { calledTools: true })).toBe("tool_calls");
    expect(mapFinishReason("length", { calledTools: true })).toBe("length");
  });

  it("finishes a response that called tools with tool_calls where the upstream sent no reason (regression)", () => {
    expect(mapFinishReason(undefined, { calledTools: true })).toBe("tool_calls");
    expect(mapFinishReason("something_new", { calledTools: true })).toBe("tool_calls");
  });

  it("tells the reasons that say the upstream gave up (vLLM's abort, OpenRouter's error) from the others", () => {
    expect(isFailureFinishReason("abort")).toBe(true);
    expect(isFailureFinishReason("error")).toBe(true);
    for (const raw of ["stop", "length", "tool_calls", "eos", undefined])
      expect(isFailureFinishReason(raw)).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { convertChatRequest } from "../../src/api/convert-chat-request.ts";
import type { ChatCompletionRequestBody } from "../../src/api/schemas/chat-completion-request.ts";
import { AppError } from "../../src/errors/app-error.ts";

const base: ChatCompletionRequestBody = { model: "tiny", messages: [{ role: "user", content: "Hi" }] };

function expectError(body: ChatCompletionRequestBody, code: string, param: string | undefined) {
  try {
    convertChatRequest(body);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(code);
    expect((error as AppError).param).toBe(param);
    return;
  }
  throw new Error("expected an error");
}

describe("convertChatRequest", () => {
  it("applies the contract's defaults", () => {
    const converted = convertChatRequest(base);
    expect(converted.stream).toBe(false);
    expect(converted.choices).toBe(1);
    expect(converted.request).toEqual({
      messages: [{ role: "user", content: "Hi" }],
      maxTokens: undefined,
      temperature: 1,
      topP: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      stop: [],
      seed: undefined,
      tools: [],
      toolChoice: { type: "none" },
      responseFormat: { type: "text" },
    });
  });

  it("treats developer as system, joins text parts, and accepts null for unset fields", () => {
    const converted = convertChatRequest({
      ...base,
      messages: [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "Hello " },
            { type: "text", text: "there" },
          ],
        },
      ],
      temperature: null,
      max_tokens: null,
      stop: "END",
    });
    expect(converted.request.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hello there" },
    ]);
    expect(converted.request.temperature).toBe(1);
    expect(converted.request.stop).toEqual(["END"]);
  });

  it("takes max_completion_tokens as an alias of max_tokens", () => {
    expect(convertChatRequest({ ...base, max_completion_tokens: 7 }).request.maxTokens).toBe(7);
    expectError(
      { ...base, max_tokens: 5, max_completion_tokens: 7 },
      "invalid_value",
      "max_completion_tokens",
    );
  });

  it("keeps assistant tool calls and tool results", () => {
    const converted = convertChatRequest({
      ...base,
      messages: [
        { role: "user", content: "Weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
    });
    expect(converted.request.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: null,
        toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      },
      { role: "tool", content: "sunny", toolCallId: "call_1" },
    ]);
  });

  it("defaults tool_choice to auto when tools are given", () => {
    const tools = [{ type: "function" as const, function: { name: "f" } }];
    expect(convertChatRequest({ ...base, tools }).request.toolChoice).toEqual({ type: "auto" });
    expect(
      convertChatRequest({ ...base, tools, tool_choice: { type: "function", function: { name: "f" } } })
        .request.toolChoice,
    ).toEqual({ type: "function", name: "f" });
    expect(convertChatRequest({ ...base, tools, parallel_tool_calls: false }).request.parallelToolCalls).toBe(
      false,
    );
    expect(convertChatRequest({ ...base, tools, parallel_tool_calls: null }).request.parallelToolCalls).toBe(
      undefined,
    );
  });

  it("refuses requests whose fields contradict each other", () => {
    expectError({ ...base, stream_options: { include_usage: true } }, "invalid_value", "stream_options");
    expectError({ ...base, tool_choice: "required" }, "invalid_value", "tool_choice");
    expectError(
      {
        ...base,
        tools: [{ type: "function", function: { name: "f" } }],
        tool_choice: { type: "function", function: { name: "g" } },
      },
      "invalid_value",
      "tool_choice.function.name",
    );
    expectError(
      {
        ...base,
        tools: [
          { type: "function", function: { name: "f" } },
          { type: "function", function: { name: "f" } },
        ],
      },
      "invalid_value",
      "tools[1].function.name",
    );
    expectError(
      { ...base, messages: [{ role: "tool", content: "x" }] },
      "missing_required_parameter",
      "messages[0].tool_call_id",
    );
    expectError(
      { ...base, messages: [{ role: "user", content: null }] },
      "missing_required_parameter",
      "messages[0].content",
    );
    expectError(
      { ...base, messages: [{ role: "user", content: [{ type: "image_url" }] }] },
      "invalid_value",
      "messages[0].content[0].type",
    );
    expectError(
      { ...base, response_format: { type: "json_schema" } },
      "missing_required_parameter",
      "response_format.json_schema",
    );
    expectError({ ...base, stop: ["a", ""] }, "invalid_value", "stop[1]");
  });
});

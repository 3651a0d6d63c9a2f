import { describe, expect, it } from "vitest";
import { convertRequestBody } from "../../../src/engine/openai/convert-request-body.ts";
import { createChatRequest } from "../../support/create-chat-request.ts";

describe("convertRequestBody", () => {
  it("sends the upstream model name, always streamed with usage, and leaves defaults and unsent sampling out", () => {
    expect(
      convertRequestBody({
        request: createChatRequest({ messages: [{ role: "user", content: "Hi" }] }),
        model: "gpt-4o-mini",
      }),
    ).toEqual({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it("sends participants' names as the client gave them", () => {
    const body = convertRequestBody({
      model: "m",
      request: createChatRequest({
        messages: [
          { role: "user", content: "Hi", name: "alice" },
          {
            role: "assistant",
            content: null,
            name: "bot",
            toolCalls: [{ id: "call_1", name: "f", arguments: "{}" }],
          },
          { role: "tool", content: "done", toolCallId: "call_1" },
          { role: "user", content: "Thanks" },
        ],
      }),
    });
    expect(body.messages).toEqual([
      { role: "user", content: "Hi", name: "alice" },
      {
        role: "assistant",
        content: null,
        name: "bot",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", content: "done", tool_call_id: "call_1" },
      { role: "user", content: "Thanks" },
    ]);
  });

  it("sends the sampling settings and reasoning effort the client sent, even at their defaults", () => {
    const body = convertRequestBody({
      model: "m",
      request: createChatRequest({ temperature: 1, topP: 1, reasoningEffort: "high" }),
    });
    expect(body).toMatchObject({ temperature: 1, top_p: 1, reasoning_effort: "high" });
    const unset = convertRequestBody({ model: "m", request: createChatRequest({ temperature: 0 }) });
    expect(unset.temperature).toBe(0);
    expect("top_p" in unset).toBe(false);
    expect("reasoning_effort" in unset).toBe(false);
  });

  it("sends the client's user, and a JSON schema's description, as sent", () => {
    const body = convertRequestBody({
      model: "m",
      request: createChatRequest({
        user: "alice@example.com",
        responseFormat: {
          type: "json_schema",
          name: "answer",
          description: "The answer to give",
          schema: { type: "object" },
          strict: true,
        },
      }),
    });
    expect(body).toMatchObject({
      user: "alice@example.com",
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "answer",
          description: "The answer to give",
          schema: { type: "object" },
          strict: true,
        },
      },
    });
    const without = convertRequestBody({ model: "m", request: createChatRequest({}) });
    expect("user" in without).toBe(false);
  });

  it("converts every message role, with tool calls and their results", () => {
    const body = convertRequestBody({
      model: "m",
      request: createChatRequest({
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather?" },
          {
            role: "assistant",
            content: null,
            toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
          },
          { role: "tool", content: '{"temp":3}', toolCallId: "call_1" },
          { role: "assistant", content: "3 degrees." },
        ],
      }),
    });
    expect(body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: "tool", content: '{"temp":3}', tool_call_id: "call_1" },
      { role: "assistant", content: "3 degrees." },
    ]);
  });

  it("passes sampling, stop, seed, max_tokens, tools, a named tool choice and a JSON schema format", () => {
    const body = convertRequestBody({
      model: "m",
      request: createChatRequest({
        maxTokens: 64,
        temperature: 0.2,
        topP: 0.9,
        frequencyPenalty: 0.5,
        presencePenalty: -0.5,
        stop: ["END", "\n\n"],
        seed: 42,
        tools: [
          { name: "f", description: "does f", parameters: { type: "object", properties: {} }, strict: true },
          { name: "g" },
        ],
        toolChoice: { type: "function", name: "f" },
        responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true },
      }),
    });
    expect(body).toMatchObject({
      max_tokens: 64,
      temperature: 0.2,
      top_p: 0.9,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      stop: ["END", "\n\n"],
      seed: 42,
      tools: [
        {
          type: "function",
          function: {
            name: "f",
            description: "does f",
            parameters: { type: "object", properties: {} },
            strict: true,
          },
        },
        { type: "function", function: { name: "g" } },
      ],
      tool_choice: { type: "function", function: { name: "f" } },
      response_format: {
        type: "json_schema",
        json_schema: { name: "answer", schema: { type: "object" }, strict: true },
      },
    });
  });

  it("sends tool_choice only with tools, and json_object as it is", () => {
    const withoutTools = convertRequestBody({
      model: "m",
      request: createChatRequest({ toolChoice: { type: "none" }, responseFormat: { type: "json_object" } }),
    });
    expect(withoutTools.tool_choice).toBeUndefined();
    expect(withoutTools.response_format).toEqual({ type: "json_object" });
    const required = convertRequestBody({
      model: "m",
      request: createChatRequest({ tools: [{ name: "f" }], toolChoice: { type: "required" } }),
    });
    expect(required.tool_choice).toBe("required");
  });

  it("sends parallel_tool_calls as the client sent it, with tools only", () => {
    const tools = [{ name: "f" }];
    const body = (parallelToolCalls: boolean | undefined, withTools = true) =>
      convertRequestBody({
        model: "m",
        request: createChatRequest({
          tools: withTools ? tools : [],
          toolChoice: { type: "auto" },
          parallelToolCalls,
        }),
      });
    expect(body(false).parallel_tool_calls).toBe(false);
    expect(body(true).parallel_tool_calls).toBe(true);
    expect("parallel_tool_calls" in body(undefined)).toBe(false);
    expect("parallel_tool_calls" in body(false, false)).toBe(false);
  });

  it("sends the max_tokens the engine gives in place of the request's, none when it gives undefined", () => {
    const unbounded = createChatRequest({});
    expect(convertRequestBody({ model: "m", request: unbounded, maxTokens: 4096 }).max_tokens).toBe(4096);
    expect(convertRequestBody({ model: "m", request: unbounded }).max_tokens).toBeUndefined();
    const bounded = createChatRequest({ maxTokens: 9 });
    expect(convertRequestBody({ model: "m", request: bounded, maxTokens: undefined })).not.toHaveProperty(
      "max_tokens",
    );
    expect(convertRequestBody({ model: "m", request: bounded }).max_tokens).toBe(9);
  });
});

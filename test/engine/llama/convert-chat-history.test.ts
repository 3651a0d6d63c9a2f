import { JinjaTemplateChatWrapper } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { convertChatHistory } from "../../../src/engine/llama/convert-chat-history.ts";
import { testModelChatTemplate } from "../../../src/gguf/test-model-chat-template.ts";

describe("convertChatHistory", () => {
  it("maps system, user and assistant messages to node-llama-cpp items", () => {
    expect(
      convertChatHistory([
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello!" },
        { role: "user", content: "Bye" },
      ]),
    ).toEqual([
      { type: "system", text: "Be brief." },
      { type: "user", text: "Hi" },
      { type: "model", response: ["Hello!"] },
      { type: "user", text: "Bye" },
    ]);
  });

  it("puts tool calls and their results into the model response that made them", () => {
    const history = convertChatHistory([
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: null,
        toolCalls: [
          { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "call_2", name: "get_weather", arguments: '{"city":"Rome"}' },
        ],
      },
      { role: "tool", toolCallId: "call_2", content: '{"celsius":25}' },
      { role: "tool", toolCallId: "call_1", content: "sunny" },
      { role: "assistant", content: "Sunny in Paris, 25 in Rome." },
    ]);
    expect(history).toEqual([
      { type: "user", text: "Weather in Paris and Rome?" },
      {
        type: "model",
        response: [
          {
            type: "functionCall",
            name: "get_weather",
            params: { city: "Paris" },
            result: "sunny",
            startsNewChunk: true,
          },
          {
            type: "functionCall",
            name: "get_weather",
            params: { city: "Rome" },
            result: { celsius: 25 },
            startsNewChunk: false,
          },
          "Sunny in Paris, 25 in Rome.",
        ],
      },
    ]);
  });

  it("keeps unparsable arguments as text and turns an orphan tool result into a user turn", () => {
    const history = convertChatHistory([
      { role: "user", content: "Go" },
      { role: "assistant", content: "Calling.", toolCalls: [{ id: "a", name: "f", arguments: "not json" }] },
      { role: "user", content: "Wait" },
      { role: "tool", toolCallId: "a", content: "late" },
    ]);
    expect(history[1]).toEqual({
      type: "model",
      response: [
        "Calling.",
        { type: "functionCall", name: "f", params: "not json", result: "", startsNewChunk: true },
      ],
    });
    expect(history[3]).toEqual({ type: "user", text: "Result of tool call a:\nlate" });
  });

  it("hands the template JSON values only where they say exactly what was sent (regression: 64-bit ids rounded, strings unquoted)", () => {
    const exact = '{"order": 7, "price": 10.5, "tags": ["a"], "ok": true}';
    const lossy = '{"order_id": 1234567890123456789, "price": 10.10, "ratio": 1e400}';
    const history = convertChatHistory([
      { role: "user", content: "Go" },
      {
        role: "assistant",
        content: null,
        toolCalls: [
          { id: "a", name: "f", arguments: exact },
          { id: "b", name: "g", arguments: lossy },
          { id: "c", name: "h", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "a", content: lossy },
      { role: "tool", toolCallId: "b", content: '"shipped"' },
      { role: "tool", toolCallId: "c", content: exact },
    ]);
    expect(history[1]).toEqual({
      type: "model",
      response: [
        {
          type: "functionCall",
          name: "f",
          params: { order: 7, price: 10.5, tags: ["a"], ok: true },
          result: lossy,
          startsNewChunk: true,
        },
        { type: "functionCall", name: "g", params: lossy, result: '"shipped"', startsNewChunk: false },
        {
          type: "functionCall",
          name: "h",
          params: {},
          result: { order: 7, price: 10.5, tags: ["a"], ok: true },
          startsNewChunk: false,
        },
      ],
    });
  });

  it("gives calls that share an id their results in turn (regression: the first result was dropped)", () => {
    const history = convertChatHistory([
      { role: "user", content: "Go" },
      {
        role: "assistant",
        content: null,
        toolCalls: [
          { id: "same", name: "f", arguments: "{}" },
          { id: "same", name: "f", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "same", content: "FIRST" },
      { role: "tool", toolCallId: "same", content: "SECOND" },
      { role: "tool", toolCallId: "same", content: "THIRD" },
    ]);
    expect(history[1]).toMatchObject({
      response: [{ result: "FIRST" }, { result: "SECOND" }],
    });
    expect(history[2]).toEqual({ type: "user", text: "Result of tool call same:\nTHIRD" });
  });

  it("gives thousands of calls that share an id their results without moving the calls each time", () => {
    // `shift()` moved every waiting call left for each result: quadratic (200,000 calls: 8 s).
    const count = 5000;
    const messages: Parameters<typeof convertChatHistory>[0] = [
      { role: "user", content: "Go" },
      {
        role: "assistant",
        content: null,
        toolCalls: Array.from({ length: count }, () => ({ id: "same", name: "f", arguments: "{}" })),
      },
      ...Array.from({ length: count }, (_, index) => ({
        role: "tool" as const,
        toolCallId: "same",
        content: String(index),
      })),
    ];
    const shift = Array.prototype.shift;
    let moved = 0;
    Array.prototype.shift = function (this: unknown[]) {
      moved += this.length;
      return shift.call(this);
    };
    let history: ReturnType<typeof convertChatHistory>;
    try {
      history = convertChatHistory(messages);
    } finally {
      Array.prototype.shift = shift;
    }
    const response = (history[1] as { response: { result: unknown }[] }).response;
    expect(response.map((call) => call.result)).toEqual(Array.from({ length: count }, (_, index) => index));
    expect(moved).toBeLessThan(count);
  });
});

describe("a conversation that ends with an assistant message", () => {
  it("is continued, as llama.cpp's server does (a prefill, as the README says)", () => {
    const history = convertChatHistory([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello" },
    ]);
    expect(history).toEqual([
      { type: "user", text: "Hi" },
      { type: "model", response: ["Hello"] },
    ]);
    // Rendered by the test model's template, the answer is left open for the model to go on.
    const wrapper = new JinjaTemplateChatWrapper({ template: testModelChatTemplate });
    const text = wrapper.generateContextState({ chatHistory: history }).contextText.toString();
    expect(text.endsWith("<|im_start|>assistant\nHello")).toBe(true);
  });
});

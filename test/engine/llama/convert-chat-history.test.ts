import { describe, expect, it } from "vitest";
import { convertChatHistory } from "../../../src/engine/llama/convert-chat-history.ts";

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
});

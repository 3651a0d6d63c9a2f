/**
 * Tool calls of an upstream model as the openai SDK's helpers read them through a real server.
 * Regressions: a no-parameter call the upstream sent with empty, missing or null arguments reached
 * the client with `arguments: ""` (the helpers throw on it), and parallel calls the upstream
 * interleaved were passed on interleaved (the stream helper threw with strict tools, and fired
 * `tool_calls.function.arguments.done` with unfinished JSON without).
 */
import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { answerJson, chunk, toolCallCompletion, writeEvents } from "./mock-upstream.ts";
import { UPSTREAM_MODEL as MODEL, useUpstreamOnlyServer } from "./use-upstream-only-server.ts";

const { server, upstream } = useUpstreamOnlyServer();
let client: OpenAI;

beforeAll(() => {
  client = new OpenAI({ baseURL: server().baseUrl, apiKey: server().createdKeys.starterKey, maxRetries: 0 });
});

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Hi" }];

function strictTool(
  name: string,
  parameters: Record<string, unknown>,
): OpenAI.Chat.ChatCompletionFunctionTool {
  return { type: "function", function: { name, strict: true, parameters } };
}

const noParameters = strictTool("now", { type: "object", properties: {}, additionalProperties: false });

describe("a no-parameter call the upstream sends without arguments", () => {
  const variants: [string, Record<string, unknown>][] = [
    ["empty", { name: "now", arguments: "" }],
    ["missing", { name: "now" }],
    ["null", { name: "now", arguments: null }],
  ];

  it.each(variants)("reaches the stream helper with {} when they are %s", async (_label, fn) => {
    upstream().handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({ tool_calls: [{ index: 0, id: "call_n", type: "function", function: fn }] }),
        chunk({}, "tool_calls"),
      ]),
    );
    const final = await client.chat.completions
      .stream({ model: MODEL, messages, tools: [noParameters] })
      .finalChatCompletion();
    expect(final.choices[0]?.message.tool_calls).toMatchObject([
      { id: "call_n", function: { name: "now", arguments: "{}", parsed_arguments: {} } },
    ]);
  });

  it.each(variants)(
    "reaches parse() with {} from a whole JSON answer when they are %s",
    async (_label, fn) => {
      upstream().handle(answerJson(toolCallCompletion(fn)));
      const completion = await client.chat.completions.parse({
        model: MODEL,
        messages,
        tools: [noParameters],
      });
      expect(completion.choices[0]?.message.tool_calls).toMatchObject([
        { id: "call_a", function: { name: "now", arguments: "{}", parsed_arguments: {} } },
      ]);
    },
  );
});

describe("parallel calls the upstream interleaves", () => {
  const withNumber = strictTool("f", {
    type: "object",
    properties: { a: { type: "integer" } },
    required: ["a"],
    additionalProperties: false,
  });

  it("reach the stream helper one after another, each whole, done once each", async () => {
    upstream().handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({
          tool_calls: [
            { index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } },
            { index: 1, id: "call_b", type: "function", function: { name: "f", arguments: "" } },
          ],
        }),
        chunk({
          tool_calls: [
            { index: 0, function: { arguments: '{"a":' } },
            { index: 1, function: { arguments: '{"a":' } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }),
        chunk({ tool_calls: [{ index: 1, function: { arguments: "2}" } }] }),
        chunk({}, "tool_calls"),
      ]),
    );
    const stream = client.chat.completions.stream({ model: MODEL, messages, tools: [withNumber] });
    const done: [number, string][] = [];
    stream.on("tool_calls.function.arguments.done", (event) => done.push([event.index, event.arguments]));
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.tool_calls).toMatchObject([
      { id: "call_a", function: { name: "f", arguments: '{"a":1}', parsed_arguments: { a: 1 } } },
      { id: "call_b", function: { name: "f", arguments: '{"a":2}', parsed_arguments: { a: 2 } } },
    ]);
    expect(done).toEqual([
      [0, '{"a":1}'],
      [1, '{"a":2}'],
    ]);
  });
});

import { describe, expect, it } from "vitest";
import { TINY_MODEL } from "../../support/test-server.ts";
import { type ChatCompletionBody, useTestServer } from "../../support/use-test-server.ts";

/**
 * The local engine's schema rules seen by a client of a real server: invalid schemas are a 400
 * that costs nothing, and streamed tool calls start with `arguments: ""`.
 */
const server = useTestServer();

const ONE = 1_000_000_000n;
let accounts = 0;
const messages = [{ role: "user", content: "Go." }];

async function post(key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 60, ...body }),
  });
}

/** The `delta.tool_calls` entries of an SSE body, in order. */
function readToolCallDeltas(body: string): Record<string, unknown>[] {
  return body
    .split("\n")
    .filter((line) => line.startsWith("data: {"))
    .flatMap((line) => {
      const chunk = JSON.parse(line.slice("data: ".length)) as {
        choices: { delta: { tool_calls?: Record<string, unknown>[] } }[];
      };
      return chunk.choices[0]?.delta.tool_calls ?? [];
    });
}

describe("invalid schemas over HTTP", () => {
  const invalid: [string, Record<string, unknown>, string, RegExp][] = [
    [
      "an unknown type",
      { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "banana" } } } },
      "response_format.json_schema.schema",
      /'type' has "banana"/,
    ],
    [
      "required that is not an array",
      {
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "object", required: "a" } },
        },
      },
      "response_format.json_schema.schema",
      /'required' must be an array/,
    ],
    [
      "a $ref that does not resolve",
      { response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/nope" } } } },
      "response_format.json_schema.schema",
      /does not resolve/,
    ],
    [
      "tool parameters of another type than object",
      {
        tools: [
          { type: "function", function: { name: "ok" } },
          { type: "function", function: { name: "text", parameters: { type: "string" } } },
        ],
      },
      "tools[1].function.parameters",
      /the root must be of type "object"/,
    ],
    [
      "an invalid schema inside tool parameters",
      {
        tools: [
          { type: "function", function: { name: "f", parameters: { properties: { a: { enum: 1 } } } } },
        ],
        tool_choice: "required",
        stream: true,
      },
      "tools[0].function.parameters",
      /at '#\/properties\/a': 'enum' must be a non-empty array/,
    ],
    [
      "a length a local grammar cannot enforce (an upstream model takes it)",
      {
        tools: [
          {
            type: "function",
            function: {
              name: "w",
              parameters: { properties: { text: { type: "string", maxLength: 100_000 } } },
            },
          },
        ],
      },
      "tools[0].function.parameters",
      /'maxLength' is 100000, above 1000/,
    ],
    [
      "a required property whose $ref only leads back into itself",
      {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "x",
            schema: { type: "object", properties: { next: { $ref: "#" } }, required: ["next"] },
          },
        },
      },
      "response_format.json_schema.schema",
      /at '#\/properties\/next': the required property 'next' has no finite value/,
    ],
    [
      "a reference to another document",
      {
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { $ref: "https://x.example/p.json" } },
        },
      },
      "response_format.json_schema.schema",
      /does not resolve/,
    ],
    [
      "more required properties than maxProperties",
      {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "x",
            schema: { type: "object", properties: { a: {}, b: {} }, required: ["a", "b"], maxProperties: 1 },
          },
        },
      },
      "response_format.json_schema.schema",
      /'required' names 2 properties, but 'maxProperties' is 1, so no value can match/,
    ],
  ];

  it.each(invalid)(
    "answers 400 invalid_value for %s, before anything is reserved",
    async (_name, body, param, message) => {
      accounts += 1;
      const { accountId, key } = await server().createFundedKey(`schemas-${accounts}`, "1");
      const response = await post(key, body);
      const error = ((await response.json()) as { error: Record<string, unknown> }).error;
      expect(response.status).toBe(400);
      expect(error).toMatchObject({ type: "invalid_request_error", code: "invalid_value", param });
      expect(error.message).toMatch(message);
      expect(await server().store.getAccountMoney(accountId)).toEqual({
        balanceNano: ONE,
        reservedNano: 0n,
        spentNano: 0n,
      });
      expect(await server().store.listUsage({ accountId })).toEqual([]);
    },
  );
});

describe("streamed tool calls over HTTP", () => {
  const tools = [
    { type: "function", function: { name: "anything", parameters: {} } },
    { type: "function", function: { name: "lookup", parameters: { properties: { q: { type: "string" } } } } },
  ];
  it.each([
    ["a named function", tools, { type: "function", function: { name: "lookup" } }],
    ["required with one tool", tools.slice(0, 1), "required"],
    ["required with several tools", tools, "required"],
  ])(
    "start each call with id, type, name and empty arguments: %s",
    async (_name, requestTools, toolChoice) => {
      const response = await post(server().starterKey, {
        tools: requestTools,
        tool_choice: toolChoice,
        stream: true,
        seed: 2,
        max_tokens: 200,
      });
      expect(response.status).toBe(200);
      const [first, ...rest] = readToolCallDeltas(await response.text());
      expect(first).toMatchObject({
        index: 0,
        id: expect.stringMatching(/^call_/),
        type: "function",
        function: { name: expect.any(String), arguments: "" },
      });
      const argumentsText = rest.map((delta) => (delta.function as { arguments: string }).arguments).join("");
      const value: unknown = JSON.parse(argumentsText);
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    },
  );
});

describe("grammar-constrained answers over HTTP", () => {
  interface Answer {
    text: string;
    finishReason: string;
    completionTokens: number;
  }

  /** The answer's JSON text (content, or the first call's arguments), finish reason and completion tokens. */
  async function ask(body: Record<string, unknown>, maxTokens: number): Promise<Answer> {
    const response = await post(server().starterKey, { ...body, seed: 3, max_tokens: maxTokens });
    expect(response.status).toBe(200);
    const completion = (await response.json()) as ChatCompletionBody;
    const [choice] = completion.choices;
    if (choice === undefined) throw new Error("no choice");
    return {
      text: choice.message.tool_calls?.[0]?.function.arguments ?? choice.message.content ?? "",
      finishReason: choice.finish_reason,
      completionTokens: completion.usage.completion_tokens,
    };
  }

  it.each([
    [
      "json_schema",
      {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "a",
            strict: true,
            schema: {
              type: "object",
              properties: { a: { type: "string", maxLength: 3 } },
              required: ["a"],
              additionalProperties: false,
            },
          },
        },
      },
      "stop",
    ],
    [
      "a named tool call",
      {
        tools: [
          {
            type: "function",
            function: {
              name: "get_time",
              parameters: {
                type: "object",
                properties: { tz: { enum: ["UTC", "CET"] } },
                required: ["tz"],
                additionalProperties: false,
              },
            },
          },
        ],
        tool_choice: { type: "function", function: { name: "get_time" } },
      },
      "tool_calls",
    ],
  ])(
    "end once the JSON is complete, billing only its tokens and the end token: %s (regression: four hidden newlines billed)",
    async (_name, body, finishReason) => {
      const whole = await ask(body, 200);
      expect(whole.finishReason).toBe(finishReason);
      JSON.parse(whole.text);
      // The fewest tokens that give the whole JSON, the same seed making each answer a prefix of
      // the whole one.
      let needed = 1;
      while ((await ask(body, needed)).text !== whole.text) {
        needed += 1;
        expect(needed).toBeLessThan(whole.completionTokens);
      }
      expect(whole.completionTokens).toBe(needed + 1);
    },
  );
});

describe("property counts over HTTP", () => {
  const schemaFormat = (schema: Record<string, unknown>) => ({
    response_format: { type: "json_schema", json_schema: { name: "counted", strict: true, schema } },
  });
  const properties = { a: { type: "integer" }, b: { type: "integer" } };

  // Regression: beside `properties` the counts were ignored: `{"a":933,"b":8}` for `maxProperties: 1`.
  it("answers with no more properties than maxProperties, as a tool call's arguments too", async () => {
    const asked = [
      schemaFormat({ type: "object", properties, additionalProperties: false, maxProperties: 1 }),
      {
        tools: [
          {
            type: "function",
            function: { name: "f", parameters: { type: "object", properties, maxProperties: 1 } },
          },
        ],
        tool_choice: "required",
      },
    ];
    for (const body of asked) {
      const response = await post(server().starterKey, { ...body, seed: 1, max_tokens: 40 });
      expect(response.status).toBe(200);
      const { choices } = (await response.json()) as ChatCompletionBody;
      const message = choices[0]?.message;
      const text = message?.tool_calls?.[0]?.function.arguments ?? message?.content ?? "";
      expect(choices[0]?.finish_reason, text).not.toBe("length");
      expect(Object.keys(JSON.parse(text) as object).length, text).toBe(1);
    }
  });
});

describe("recursive schemas over HTTP", () => {
  // Regression: every declared property was written, so `next` nested until the context was full
  // (2037 tokens billed, finish_reason length, never valid JSON).
  it.each([
    [
      "json_schema",
      {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "list",
            schema: { type: "object", properties: { value: { type: "integer" }, next: { $ref: "#" } } },
          },
        },
      },
      "stop",
    ],
    [
      "tool arguments",
      {
        tools: [
          {
            type: "function",
            function: {
              name: "f",
              parameters: {
                type: "object",
                properties: { name: { type: "string", maxLength: 3 }, child: { $ref: "#" } },
              },
            },
          },
        ],
        tool_choice: "required",
      },
      "tool_calls",
    ],
  ])("end the JSON of an optional property that can only recurse: %s", async (_name, body, reason) => {
    const response = await post(server().starterKey, { ...body, seed: 1, max_tokens: 400 });
    expect(response.status).toBe(200);
    const completion = (await response.json()) as ChatCompletionBody;
    const [choice] = completion.choices;
    expect(choice?.finish_reason).toBe(reason);
    const text = choice?.message.tool_calls?.[0]?.function.arguments ?? choice?.message.content ?? "";
    const value = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(value).every((key) => key === "value" || key === "name")).toBe(true);
    expect(completion.usage.completion_tokens).toBeLessThan(100);
  });
});

describe("tool calls in the history over HTTP", () => {
  it("takes arguments and results nested far deeper than a body may be as text (regression: 500, a stack overflow in node-llama-cpp)", async () => {
    // 20,000 brackets in all: as text they are counted, and too long for the tiny model's context.
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    const response = await post(server().starterKey, {
      messages: [
        { role: "user", content: "Go." },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: deep } }],
        },
        { role: "tool", tool_call_id: "call_1", content: deep },
      ],
      max_tokens: 2,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
      "context_length_exceeded",
    );
  });
});

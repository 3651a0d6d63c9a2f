import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, TINY_MODEL } from "../../support/test-server.ts";

/**
 * The local engine's schema rules seen by a client of a real server: invalid schemas are a 400
 * that costs nothing, and streamed tool calls start with `arguments: ""`.
 */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});

afterAll(async () => {
  await server?.close();
});

const ONE = 1_000_000_000n;
let accounts = 0;
const messages = [{ role: "user", content: "Go." }];

async function post(key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
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
      /'maxLength' is 100000, above 2000/,
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
  ];

  it.each(invalid)(
    "answers 400 invalid_value for %s, before anything is reserved",
    async (_name, body, param, message) => {
      accounts += 1;
      const { accountId, key } = await server.createFundedKey(`schemas-${accounts}`, "1");
      const response = await post(key, body);
      const error = ((await response.json()) as { error: Record<string, unknown> }).error;
      expect(response.status).toBe(400);
      expect(error).toMatchObject({ type: "invalid_request_error", code: "invalid_value", param });
      expect(error.message).toMatch(message);
      expect(await server.store.getAccountMoney(accountId)).toEqual({
        balanceNano: ONE,
        reservedNano: 0n,
        spentNano: 0n,
      });
      expect(await server.store.listUsage({ accountId })).toEqual([]);
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
      const response = await post(server.starterKey, {
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

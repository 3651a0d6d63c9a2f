import { describe, expect, it } from "vitest";
import { type ErrorBody, postTinyChat } from "../../support/test-server.ts";
import { useTestServer } from "../../support/use-test-server.ts";

/**
 * Tool schemas that held a local model's event loop for seconds before their request was refused
 * (a refusal costs its key nothing, so any key could stall every client over and over):
 * - a forced call's prompt holds its tool's parameters as JSON, whole, keywords the grammar drops
 *   (`pattern`, `x-...`, `examples`) included, and none of those were counted before the prompt
 *   was rendered and tokenized in one piece: 7 MB of them held the event loop 1.6 to 1.9 s;
 * - llama.cpp's grammar parser makes a rule for every optional repeat of a length or count range,
 *   and every tool's grammar is built before the exact context check: four tools of 1000 string
 *   ranges each held it 0.9 s (`required`: 1.4 s).
 * Both are now refused first: the prompt a piece at a time ("more than N tokens", the lower bound
 * counted before rendering; the rendered prompt's count is exact), the ranges before any grammar.
 */
const server = useTestServer();

function post(body: Record<string, unknown>): Promise<Response> {
  return postTinyChat(server(), body);
}

function tool(name: string, parameters: Record<string, unknown>) {
  return { type: "function", function: { name, parameters } };
}

/** Half a megabyte: far beyond the tiny model's 1024 tokens, within a test server's body limit. */
const long = "a".repeat(500_000);

describe("keywords a forced call's prompt holds", () => {
  const small = tool("other", { type: "object", properties: { b: { type: "string" } } });
  const cases: [string, Record<string, unknown>, unknown][] = [
    [
      "a huge pattern, named function",
      { type: "object", properties: { a: { type: "string", pattern: long } } },
      { type: "function", function: { name: "f" } },
    ],
    [
      "a huge unknown keyword, named function",
      { type: "object", "x-foo": long, properties: { a: { type: "string" } } },
      { type: "function", function: { name: "f" } },
    ],
    [
      "an unknown keyword holding many keys, required with several tools",
      {
        type: "object",
        "x-foo": Object.fromEntries(Array.from({ length: 40_000 }, (_, index) => [`k${index}`, index])),
        properties: { a: { type: "string" } },
      },
      "required",
    ],
    [
      "huge examples in a definition, required with several tools",
      {
        type: "object",
        $defs: { d: { type: "string", examples: [long] } },
        properties: { a: { $ref: "#/$defs/d" } },
      },
      "required",
    ],
  ];

  it.each(cases)(
    "refuses %s for its length before rendering the prompt (regression: rendered and tokenized whole, seconds)",
    async (_name, parameters, toolChoice) => {
      const response = await post({ tools: [tool("f", parameters), small], tool_choice: toolChoice });
      const { error } = (await response.json()) as ErrorBody;
      expect(response.status).toBe(400);
      expect(error).toMatchObject({
        type: "invalid_request_error",
        code: "context_length_exceeded",
        param: "messages",
      });
      // "more than": counted a piece at a time before rendering (the rendered prompt's count is exact).
      expect(error.message).toMatch(
        /^This model's maximum context length is 1024 tokens\. However, you requested more than \d+ tokens \(more than \d+ in the messages \(the tools' names, descriptions and parameter schemas count as part of them\), 8 in the completion\)\. Please reduce the length of the messages, tools or completion\.$/,
      );
    },
  );

  it("offers the same tool under auto, whose prompt documents only what the grammar keeps", async () => {
    const response = await post({
      tools: [
        tool("f", { type: "object", "x-foo": long, properties: { a: { type: "string", pattern: long } } }),
      ],
      tool_choice: "auto",
    });
    expect(response.status).toBe(200);
  });
});

/** An object of `count` strings whose ranges are all different: `maxLength` from `largest` down. */
function distinctStrings(count: number, largest: number): Record<string, unknown> {
  return {
    type: "object",
    properties: Object.fromEntries(
      Array.from({ length: count }, (_, index) => [
        `s${index}`,
        { type: "string", maxLength: largest - index },
      ]),
    ),
  };
}

describe("length and count ranges of the output grammars", () => {
  it.each([
    [
      "one tool's string ranges, required",
      { tools: [tool("f", distinctStrings(60, 1000))], tool_choice: "required" },
      "tools[0].function.parameters",
      /^Invalid JSON Schema in 'tools\[0\]\.function\.parameters': its length and count ranges \(minLength to maxLength, minItems to maxItems, minProperties to maxProperties, a pattern's quantifiers\) add up to more than 50000 repeats \(what a local model's output grammar takes\): each range counts its maximum/,
    ],
    [
      "a response format's array ranges",
      {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "x",
            schema: {
              type: "object",
              properties: Object.fromEntries(
                Array.from({ length: 51 }, (_, index) => [
                  `a${index}`,
                  { type: "array", items: { type: "integer" }, maxItems: 1000 },
                ]),
              ),
            },
          },
        },
      },
      "response_format.json_schema.schema",
      /^Invalid JSON Schema in 'response_format\.json_schema\.schema': its length and count ranges .* more than 50000 repeats/,
    ],
    [
      "four tools' ranges together, auto",
      {
        tools: [0, 1, 2, 3].map((index) => tool(`t${index}`, distinctStrings(15, 1000 - index * 15))),
        tool_choice: "auto",
      },
      "tools[3].function.parameters",
      /^Invalid JSON Schema in 'tools\[3\]\.function\.parameters': the request's tools together have length and count ranges .* of more than 50000 repeats, each range counting its maximum .* Offer fewer tools, or lower the maximums of their ranges\.$/,
    ],
  ])(
    "refuses %s before building any grammar (regression: built first, up to 1.4 s)",
    async (_name, body, param, message) => {
      const response = await post(body);
      const { error } = (await response.json()) as ErrorBody;
      expect(response.status).toBe(400);
      expect(error).toMatchObject({ type: "invalid_request_error", code: "invalid_value", param });
      expect(error.message).toMatch(message);
    },
  );

  it("takes many fields that share their string ranges, and ranges of ordinary size", async () => {
    const properties: Record<string, unknown> = {};
    for (let index = 0; index < 900; index++)
      properties[`s${index}`] = { type: "string", minLength: 1, maxLength: [80, 255, 1000][index % 3] };
    for (let index = 0; index < 40; index++)
      properties[`a${index}`] = { type: "array", items: { type: "string", maxLength: 100 }, maxItems: 1000 };
    const response = await post({
      response_format: {
        type: "json_schema",
        json_schema: { name: "x", schema: { type: "object", properties } },
      },
      max_tokens: 4,
    });
    expect(response.status).toBe(200);
  });
});

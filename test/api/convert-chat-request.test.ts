import { describe, expect, it } from "vitest";
import {
  MAX_LARGE_ENUM_CHARS,
  MAX_REQUEST_SCHEMA_ENTRIES,
  MAX_SCHEMA_STRING_CHARS,
} from "../../src/api/check-schema-size.ts";
import { convertChatRequest } from "../../src/api/convert-chat-request.ts";
import type { ChatCompletionRequestBody } from "../../src/api/schemas/chat-completion-request.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { createConstantComparisons } from "../engine/llama/schema-bombs.ts";

const base: ChatCompletionRequestBody = { model: "tiny", messages: [{ role: "user", content: "Hi" }] };

function expectError(body: ChatCompletionRequestBody, code: string, param: string | undefined): AppError {
  try {
    convertChatRequest(body);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(code);
    expect((error as AppError).param).toBe(param);
    return error as AppError;
  }
  throw new Error("expected an error");
}

describe("convertChatRequest", () => {
  it("applies the contract's defaults, and leaves sampling the client did not set to the engine", () => {
    const converted = convertChatRequest(base);
    expect(converted.stream).toBe(false);
    expect(converted.choices).toBe(1);
    expect(converted.request).toEqual({
      messages: [{ role: "user", content: "Hi" }],
      maxTokens: undefined,
      temperature: undefined,
      topP: undefined,
      frequencyPenalty: 0,
      presencePenalty: 0,
      stop: [],
      seed: undefined,
      tools: [],
      toolChoice: { type: "none" },
      responseFormat: { type: "text" },
    });
  });

  it("keeps the user for the engine and the ledger, and a JSON schema's description", () => {
    const converted = convertChatRequest({
      ...base,
      user: "u-1",
      response_format: {
        type: "json_schema",
        json_schema: { name: "answer", description: "What to say", schema: { type: "object" } },
      },
    });
    expect(converted.user).toBe("u-1");
    expect(converted.request.user).toBe("u-1");
    expect(converted.request.responseFormat).toEqual({
      type: "json_schema",
      name: "answer",
      description: "What to say",
      schema: { type: "object" },
    });
  });

  it("treats developer as system, joins text parts by line breaks, and accepts null for unset fields", () => {
    const converted = convertChatRequest({
      ...base,
      messages: [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "line one" },
            { type: "text", text: "line two" },
          ],
        },
      ],
      temperature: null,
      max_tokens: null,
      stop: "END",
    });
    expect(converted.request.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "line one\nline two", contentParts: ["line one", "line two"] },
    ]);
    expect(converted.request.temperature).toBeUndefined();
    expect(converted.request.stop).toEqual(["END"]);
  });

  // Regression: a conversation replayed from OpenAI's answers, a refusal among them, was a 400.
  it("takes an assistant's refusal as what it said: the field beside null or empty content, and refusal parts", () => {
    const converted = convertChatRequest({
      ...base,
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: null, refusal: "I can't help with that." },
        { role: "user", content: "Why?" },
        { role: "assistant", content: "", refusal: "It is not allowed." },
        { role: "user", content: "Sure?" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Well," },
            { type: "refusal", refusal: "no." },
          ],
        },
        { role: "user", content: "Fine." },
        { role: "assistant", content: "Good.", refusal: null },
        { role: "user", content: "And?" },
        { role: "assistant", content: [], refusal: "Still no." },
      ],
    });
    expect(converted.request.messages.filter((message) => message.role === "assistant")).toEqual([
      { role: "assistant", content: "I can't help with that." },
      { role: "assistant", content: "It is not allowed." },
      { role: "assistant", content: "Well,\nno.", contentParts: ["Well,", "no."] },
      { role: "assistant", content: "Good." },
      { role: "assistant", content: "Still no." },
    ]);
    // A refusal part is an assistant's: anyone else's is refused, as any part but text is.
    expectError(
      { ...base, messages: [{ role: "user", content: [{ type: "refusal", refusal: "no" }] }] },
      "invalid_value",
      "messages[0].content[0].type",
    );
    expectError(
      { ...base, messages: [{ role: "assistant", content: [{ type: "refusal", text: "no" }] }] },
      "missing_required_parameter",
      "messages[0].content[0].refusal",
    );
    expectError(
      { ...base, messages: [{ role: "assistant", content: null, refusal: null }] },
      "missing_required_parameter",
      "messages[0].content",
    );
  });

  it("takes null inside messages and tools as absent, as a message a client library dumped has them", () => {
    const { request } = convertChatRequest({
      ...base,
      messages: [
        { role: "user", content: "Weather?", name: null },
        {
          role: "assistant",
          content: null,
          name: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: "{}" } }],
        },
        { role: "tool", content: "sunny", tool_call_id: "call_1", name: null },
        { role: "assistant", content: "Sunny.", tool_calls: null },
      ],
      tools: [{ type: "function", function: { name: "weather", description: null, parameters: null } }],
      stream: true,
      stream_options: { include_usage: null },
    });
    expect(request.messages).toEqual([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: null, toolCalls: [{ id: "call_1", name: "weather", arguments: "{}" }] },
      { role: "tool", content: "sunny", toolCallId: "call_1" },
      { role: "assistant", content: "Sunny." },
    ]);
    expect(request.tools).toEqual([{ name: "weather" }]);
  });

  // Regression: stored whole in the usage ledger, shown by the admin API, the CSV and the CLI.
  it("refuses a user that holds an API key, without repeating it", () => {
    const key = "sk-tg-abcdefghijkl-0123456789abcdefghijklmnopqrstuv";
    for (const user of [key, `team-a:${key}`]) {
      const error = expectError({ ...base, user }, "invalid_value", "user");
      expect(error.message).not.toContain("0123456789");
    }
    // A public id alone names a key, not its secret.
    expect(convertChatRequest({ ...base, user: "sk-tg-abcdefghijkl" }).user).toBe("sk-tg-abcdefghijkl");
  });

  it("refuses a user with half of a surrogate pair, which the usage row could not keep as sent", () => {
    expectError({ ...base, user: "ab\ud800" }, "invalid_value", "user");
    expect(convertChatRequest({ ...base, user: "emoji \u{1F600}" }).user).toBe("emoji \u{1F600}");
  });

  it("repeats at most 256 characters of a client's value in an error message", () => {
    const long = "x".repeat(100_000);
    for (const body of [
      { ...base, messages: [{ role: "user", content: [{ type: long, text: "Hi" }] }] },
      {
        ...base,
        tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
        tool_choice: { type: "function", function: { name: long } },
      },
    ] as ChatCompletionRequestBody[]) {
      let message = "";
      try {
        convertChatRequest(body);
      } catch (error) {
        message = (error as AppError).message;
      }
      expect(message).toContain(`'${"x".repeat(256)}...'`);
      expect(message.length).toBeLessThan(400);
    }
  });

  it("refuses a number in a schema too large for a double, which would go upstream as null", () => {
    const tooLarge = JSON.parse('{"type":"number","maximum":1e309}') as Record<string, unknown>;
    let message = "";
    try {
      convertChatRequest({
        ...base,
        response_format: { type: "json_schema", json_schema: { name: "n", schema: tooLarge } },
      });
    } catch (error) {
      message = (error as AppError).message;
      expect((error as AppError).code).toBe("invalid_value");
    }
    expect(message).toContain("the number at '#/maximum' is too large for a double");
    const negative = JSON.parse('{"enum":[1,-1e309]}') as Record<string, unknown>;
    expectError(
      {
        ...base,
        tools: [
          {
            type: "function",
            function: { name: "f", parameters: { type: "object", properties: { a: negative } } },
          },
        ],
      },
      "invalid_value",
      "tools[0].function.parameters",
    );
  });

  it("bounds the properties the schemas of one request declare together, however many tools carry them", () => {
    const tool = (index: number) => ({
      type: "function" as const,
      function: {
        name: `f${index}`,
        parameters: {
          type: "object",
          properties: Object.fromEntries(
            Array.from({ length: 5000 }, (_, key) => [`p${key}`, { type: "integer" }]),
          ),
        },
      },
    });
    // Four tools of 5000 (each schema's own most) make the request's 20,000.
    expect(convertChatRequest({ ...base, tools: [0, 1, 2, 3].map(tool) }).request.tools).toHaveLength(4);
    let error: unknown;
    try {
      convertChatRequest({ ...base, tools: [0, 1, 2, 3, 4].map(tool) });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).param).toBe("tools[4].function.parameters");
    expect((error as AppError).message).toContain(
      `declare more than ${MAX_REQUEST_SCHEMA_ENTRIES} properties and enum values together`,
    );
  });

  it("keeps the names of participants", () => {
    const { request } = convertChatRequest({
      ...base,
      messages: [
        { role: "system", content: "Referee.", name: "rules" },
        { role: "user", content: "Hi", name: "alice" },
        { role: "assistant", content: "Hello", name: "bot" },
        { role: "user", content: "Hey" },
      ],
    });
    expect(request.messages).toEqual([
      { role: "system", content: "Referee.", name: "rules" },
      { role: "user", content: "Hi", name: "alice" },
      { role: "assistant", content: "Hello", name: "bot" },
      { role: "user", content: "Hey" },
    ]);
  });

  it("keeps the sampling settings and reasoning effort the client sent", () => {
    const { request } = convertChatRequest({ ...base, temperature: 0, top_p: 0.5, reasoning_effort: "low" });
    expect(request).toMatchObject({ temperature: 0, topP: 0.5, reasoningEffort: "low" });
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

  it("takes tool_choice auto, the contract's default, without tools as none (regression: refused with 400)", () => {
    expect(convertChatRequest({ ...base, tool_choice: "auto" }).request.toolChoice).toEqual({ type: "none" });
    expect(convertChatRequest({ ...base, tools: [], tool_choice: "auto" }).request.toolChoice).toEqual({
      type: "none",
    });
    expect(convertChatRequest({ ...base, tool_choice: "none" }).request.toolChoice).toEqual({ type: "none" });
  });

  it("refuses a user with NUL in it, which the usage row could not hold on PostgreSQL (regression: uncharged, reservation left)", () => {
    expectError({ ...base, user: "a\u0000b" }, "invalid_value", "user");
    expect(convertChatRequest({ ...base, user: "a\u0001b \u{1F600}" }).user).toBe("a\u0001b \u{1F600}");
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

  describe("bounds the strings of a schema as OpenAI's structured outputs do", () => {
    const format = (schema: Record<string, unknown>): ChatCompletionRequestBody => ({
      ...base,
      response_format: { type: "json_schema", json_schema: { name: "answer", schema } },
    });
    const tool = (parameters: Record<string, unknown>): ChatCompletionRequestBody => ({
      ...base,
      tools: [
        { type: "function", function: { name: "ok", parameters: { type: "object" } } },
        { type: "function", function: { name: "big", parameters } },
      ],
    });
    /** A string of `length` characters. */
    const text = (length: number, letter = "x") => letter.repeat(length);
    /** The message of the error converting `body` throws, after checking its code and param. */
    const refusal = (body: ChatCompletionRequestBody, param: string): string => {
      try {
        convertChatRequest(body);
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        expect((error as AppError).code).toBe("invalid_value");
        expect((error as AppError).param).toBe(param);
        return (error as AppError).message;
      }
      throw new Error("expected an error");
    };
    const formatParam = "response_format.json_schema.schema";

    it("refuses one long enum value, property name, definition name, const or undeclared required name", () => {
      const long = text(MAX_SCHEMA_STRING_CHARS + 1);
      const schemas: Record<string, unknown>[] = [
        { type: "object", properties: { a: { enum: [long] } } },
        { type: "object", properties: { [long]: { type: "string" } } },
        { type: "object", $defs: { [long]: { type: "string" } } },
        { type: "object", definitions: { [long]: { type: "string" } } },
        { type: "object", properties: { a: { const: long } } },
        { type: "object", properties: { a: { const: { [long]: 1 } } } },
        { type: "object", properties: { a: { enum: [{ nested: [long] }] } } },
        { type: "object", required: [long] },
      ];
      for (const schema of schemas) {
        expect(refusal(format(schema), formatParam)).toMatch(
          /property names, definition names, enum values and const values hold more than 120000 characters in all/,
        );
      }
      expect(refusal(tool(schemas[0] ?? {}), "tools[1].function.parameters")).toMatch(/120000 characters/);
      // A 7 MB string is refused as fast as a short one, before the grammar converter sees it.
      expect(
        refusal(format({ type: "object", properties: { a: { enum: [text(7_000_000)] } } }), formatParam),
      ).toMatch(/passed at '#\/properties\/a\/enum\/0'/);
    });

    // Regression: the pointer cut at 100 code units from each end split emoji, and the client
    // got lone surrogates ("\ud83d") in the message.
    it("shortens the pointer it names without cutting an emoji in half", () => {
      // '#/properties/' and 86 letters are 99 units; 92 letters and '/enum/0' follow the second emoji.
      const name = `${text(86, "p")}😀${text(10, "q")}😀${text(92, "r")}`;
      const message = refusal(
        format({ type: "object", properties: { [name]: { enum: [text(MAX_SCHEMA_STRING_CHARS + 1)] } } }),
        formatParam,
      );
      expect(message).toContain(`passed at '#/properties/${text(86, "p")}...${text(92, "r")}/enum/0'`);
      expect(message.isWellFormed()).toBe(true);
    });

    it("counts names and constants across the whole schema, and nothing else", () => {
      // Exactly the bound, spread over every kind of counted string.
      const quarter = MAX_SCHEMA_STRING_CHARS / 4;
      const atTheBound = {
        type: "object",
        properties: { [text(quarter - 1, "p")]: { type: "string" }, d: { $ref: "#/$defs/D" } },
        required: [text(quarter, "r")],
        $defs: { D: { enum: [text(quarter - 1, "e")] } },
        allOf: [{ properties: { c: { const: text(quarter - 1, "c") } } }],
      };
      expect(() => convertChatRequest(format(atTheBound))).not.toThrow();
      const overTheBound = { ...atTheBound, required: [text(quarter + 1, "r")] };
      expect(refusal(format(overTheBound), formatParam)).toMatch(/more than 120000 characters/);
      // Descriptions, patterns, titles and defaults are not spelled out by a grammar: they do not
      // count, nor does a property named like a keyword, whose schema is not a constant.
      const long = text(MAX_SCHEMA_STRING_CHARS * 2);
      const annotated = {
        type: "object",
        description: long,
        title: long,
        properties: {
          a: { type: "string", pattern: long, format: long, default: long, examples: [long] },
          const: { type: "string", description: long },
          enum: { type: "string", description: long },
        },
        required: ["a", "const", "enum"],
      };
      expect(() => convertChatRequest(format(annotated))).not.toThrow();
    });

    it("bounds an enum of more than 250 strings to 15,000 characters", () => {
      const values = (count: number, length: number) =>
        Array.from({ length: count }, (_, index) => `${index}`.padEnd(length, "v"));
      const schema = (values: unknown[]) => ({ type: "object", properties: { pick: { enum: values } } });
      // 251 values of 60 characters: 15,060.
      expect(refusal(format(schema(values(251, 60))), formatParam)).toMatch(
        /at '#\/properties\/pick\/enum': an enum of more than 250 strings \(251\) may hold 15000 characters in all, not 15060/,
      );
      // 250 values may hold more; 251 may hold 15,000; other values than strings do not count.
      expect(() => convertChatRequest(format(schema(values(250, 100))))).not.toThrow();
      const exactly = values(251, 59);
      exactly[0] = `${exactly[0]}${text(MAX_LARGE_ENUM_CHARS - 251 * 59)}`;
      expect(() => convertChatRequest(format(schema(exactly)))).not.toThrow();
      expect(() => convertChatRequest(format(schema([...values(250, 100), 1, 2, null])))).not.toThrow();
    });

    it("counts the properties, enum values and constants' members a schema declares before converting it", () => {
      const numbers = (count: number) => Array.from({ length: count }, (_, index) => index);
      expect(
        refusal(format({ type: "object", properties: { a: { const: numbers(5001) } } }), formatParam),
      ).toMatch(/declares more than 5000 properties and enum values in all/);
      expect(
        refusal(format({ type: "object", properties: { a: { enum: numbers(1_000_000) } } }), formatParam),
      ).toMatch(/declares more than 5000/);
      const names = (count: number) => Array.from({ length: count }, (_, index) => `n${index}`);
      expect(refusal(format({ type: "object", required: names(5001) }), formatParam)).toMatch(
        /more than 5000/,
      );
      expect(() =>
        convertChatRequest(format({ type: "object", properties: { a: { enum: numbers(4999) } } })),
      ).not.toThrow(); // 4999 values and the property that holds them
    });
  });
});

describe("convertChatRequest: the checks of the tools' constants", () => {
  it("are one request's, shared by its tools (regression: each tool had them all)", () => {
    // Some 4,000,000 checks each, past the request's 200,000.
    const heavy = createConstantComparisons();
    // No value meets it, when it is checked: alone, it is refused.
    const impossible = { type: "object", properties: { b: { const: "abc", maxLength: 2 } }, required: ["b"] };
    const tool = (name: string, parameters: Record<string, unknown>) => ({
      type: "function" as const,
      function: { name, parameters },
    });
    expectError(
      { ...base, tools: [tool("impossible", impossible)] },
      "invalid_value",
      "tools[0].function.parameters",
    );
    // After six heavy tools, the request's checks are spent: the constant is taken to meet the rest.
    const tools = [
      ...Array.from({ length: 6 }, (_, index) => tool(`heavy${index}`, heavy)),
      tool("impossible", impossible),
    ];
    expect(convertChatRequest({ ...base, tools }).request.tools).toHaveLength(7);
  });
});

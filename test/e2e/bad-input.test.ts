import { once } from "node:events";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { EMBEDDING_MODEL, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const server = useTestServer({ bodyLimitBytes: 64 * 1024 });

async function post(body: string | Uint8Array, headers: Record<string, string> = {}) {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${server().starterKey}`,
      "content-type": "application/json",
      ...headers,
    },
    body,
  });
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as { error: Record<string, unknown> },
  };
}

const valid = { model: TINY_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 };

/** `{"a":{"a":...{"a":1}}}`, `depth` objects deep. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { a: 1 };
  for (let level = 1; level < depth; level++) value = { a: value };
  return value;
}

/** [name, body changes, status, code, param] */
const cases: [string, Record<string, unknown>, number, string, string | null][] = [
  ["missing model", { model: undefined }, 400, "missing_required_parameter", "model"],
  ["model not a string", { model: 5 }, 400, "invalid_type", "model"],
  ["missing messages", { messages: undefined }, 400, "missing_required_parameter", "messages"],
  ["messages not an array", { messages: "hi" }, 400, "invalid_type", "messages"],
  ["messages empty", { messages: [] }, 400, "invalid_value", "messages"],
  ["message not an object", { messages: [5] }, 400, "invalid_type", "messages[0]"],
  [
    "message without role",
    { messages: [{ content: "x" }] },
    400,
    "missing_required_parameter",
    "messages[0].role",
  ],
  [
    "unknown role",
    { messages: [{ role: "wizard", content: "x" }] },
    400,
    "invalid_value",
    "messages[0].role",
  ],
  ["role not a string", { messages: [{ role: 1, content: "x" }] }, 400, "invalid_type", "messages[0].role"],
  [
    "content not a string",
    { messages: [{ role: "user", content: 5 }] },
    400,
    "invalid_type",
    "messages[0].content",
  ],
  [
    "user content missing",
    { messages: [{ role: "user" }] },
    400,
    "missing_required_parameter",
    "messages[0].content",
  ],
  [
    "content part without type",
    { messages: [{ role: "user", content: [{ text: "x" }] }] },
    400,
    "missing_required_parameter",
    "messages[0].content[0].type",
  ],
  [
    "image content part",
    { messages: [{ role: "user", content: [{ type: "image_url" }] }] },
    400,
    "invalid_value",
    "messages[0].content[0].type",
  ],
  [
    "tool message without id",
    {
      messages: [
        { role: "user", content: "x" },
        { role: "tool", content: "r" },
      ],
    },
    400,
    "missing_required_parameter",
    "messages[1].tool_call_id",
  ],
  [
    "assistant tool call malformed",
    { messages: [{ role: "assistant", content: null, tool_calls: [{ id: "c", function: { name: "f" } }] }] },
    400,
    "missing_required_parameter",
    "messages[0].tool_calls[0].function.arguments",
  ],
  ["temperature above 2", { temperature: 2.5 }, 400, "invalid_value", "temperature"],
  ["temperature below 0", { temperature: -0.1 }, 400, "invalid_value", "temperature"],
  ["temperature as a string", { temperature: "1" }, 400, "invalid_type", "temperature"],
  ["top_p above 1", { top_p: 1.01 }, 400, "invalid_value", "top_p"],
  ["frequency_penalty below -2", { frequency_penalty: -2.5 }, 400, "invalid_value", "frequency_penalty"],
  ["presence_penalty above 2", { presence_penalty: 3 }, 400, "invalid_value", "presence_penalty"],
  ["max_tokens 0", { max_tokens: 0 }, 400, "invalid_value", "max_tokens"],
  ["max_tokens fractional", { max_tokens: 1.5 }, 400, "invalid_type", "max_tokens"],
  ["max_tokens beyond any count (1e30)", { max_tokens: 1e30 }, 400, "invalid_value", "max_tokens"],
  // A double cannot hold it: it would go on as another seed (2^63 - 1 as 2^63).
  ["seed beyond 2^53 - 1", { seed: 2 ** 53 }, 400, "invalid_value", "seed"],
  ["seed below -(2^53 - 1)", { seed: -(2 ** 53) }, 400, "invalid_value", "seed"],
  [
    "tool parameters nested 65 deep",
    { tools: [{ type: "function", function: { name: "f", parameters: nested(65) } }] },
    400,
    "invalid_value",
    "tools[0].function.parameters",
  ],
  [
    "a response schema nested 65 deep",
    { response_format: { type: "json_schema", json_schema: { name: "deep", schema: nested(65) } } },
    400,
    "invalid_value",
    "response_format.json_schema.schema",
  ],
  ["max_tokens above 2^31 - 1", { max_tokens: 2 ** 31 }, 400, "invalid_value", "max_tokens"],
  [
    "max_completion_tokens beyond any count",
    { max_completion_tokens: 1e30 },
    400,
    "invalid_value",
    "max_completion_tokens",
  ],
  [
    "max_completion_tokens negative",
    { max_completion_tokens: -1 },
    400,
    "invalid_value",
    "max_completion_tokens",
  ],
  ["stream not a boolean", { stream: "yes" }, 400, "invalid_type", "stream"],
  [
    "stream_options without stream",
    { stream_options: { include_usage: true } },
    400,
    "invalid_value",
    "stream_options",
  ],
  [
    "stream_options.include_usage not a boolean",
    { stream: true, stream_options: { include_usage: 1 } },
    400,
    "invalid_type",
    "stream_options.include_usage",
  ],
  ["stop not a string or array", { stop: 5 }, 400, "invalid_type", "stop"],
  ["stop with 5 entries", { stop: ["a", "b", "c", "d", "e"] }, 400, "array_above_max_length", "stop"],
  ["stop entry not a string", { stop: ["a", 1] }, 400, "invalid_type", "stop[1]"],
  ["stop entry empty", { stop: [""] }, 400, "invalid_value", "stop[0]"],
  ["n 0", { n: 0 }, 400, "invalid_value", "n"],
  ["n 2 on a local model", { n: 2 }, 400, "invalid_value", "n"],
  ["tools not an array", { tools: {} }, 400, "invalid_type", "tools"],
  [
    "tool of another type",
    { tools: [{ type: "retrieval", function: { name: "f" } }] },
    400,
    "invalid_value",
    "tools[0].type",
  ],
  [
    "a custom tool (another kind than function, without a function object)",
    { tools: [{ type: "custom", custom: { name: "grammar" } }] },
    400,
    "invalid_value",
    "tools[0].type",
  ],
  [
    "an allowed_tools tool_choice",
    {
      tools: [{ type: "function", function: { name: "f" } }],
      tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [] } },
    },
    400,
    "invalid_value",
    "tool_choice.type",
  ],
  [
    "tool without a function name",
    { tools: [{ type: "function", function: {} }] },
    400,
    "missing_required_parameter",
    "tools[0].function.name",
  ],
  [
    "tool with a bad name",
    { tools: [{ type: "function", function: { name: "no spaces" } }] },
    400,
    "invalid_value",
    "tools[0].function.name",
  ],
  [
    "tool parameters not an object",
    { tools: [{ type: "function", function: { name: "f", parameters: "x" } }] },
    400,
    "invalid_type",
    "tools[0].function.parameters",
  ],
  [
    "too many tools",
    {
      tools: Array.from({ length: 129 }, (_, index) => ({
        type: "function",
        function: { name: `f${index}` },
      })),
    },
    400,
    "array_above_max_length",
    "tools",
  ],
  [
    "tool_choice unknown string",
    { tools: [{ type: "function", function: { name: "f" } }], tool_choice: "sometimes" },
    400,
    "invalid_value",
    "tool_choice",
  ],
  ["tool_choice of the wrong type", { tool_choice: 5 }, 400, "invalid_type", "tool_choice"],
  [
    "tool_choice naming no tool",
    {
      tools: [{ type: "function", function: { name: "f" } }],
      tool_choice: { type: "function", function: { name: "g" } },
    },
    400,
    "invalid_value",
    "tool_choice.function.name",
  ],
  [
    "tool_choice object without a name",
    {
      tools: [{ type: "function", function: { name: "f" } }],
      tool_choice: { type: "function", function: {} },
    },
    400,
    "missing_required_parameter",
    "tool_choice.function.name",
  ],
  ["tool_choice required without tools", { tool_choice: "required" }, 400, "invalid_value", "tool_choice"],
  [
    "response_format unknown type",
    { response_format: { type: "xml" } },
    400,
    "invalid_value",
    "response_format.type",
  ],
  [
    "response_format json_schema missing",
    { response_format: { type: "json_schema" } },
    400,
    "missing_required_parameter",
    "response_format.json_schema",
  ],
  [
    "response_format json_schema without name",
    { response_format: { type: "json_schema", json_schema: { schema: {} } } },
    400,
    "missing_required_parameter",
    "response_format.json_schema.name",
  ],
  [
    "response_format json_schema with an unknown type, before the model is looked up",
    {
      model: "no-such-model",
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "banana" } } },
    },
    400,
    "invalid_value",
    "response_format.json_schema.schema",
  ],
  [
    "response_format json_schema with a $ref that does not resolve",
    { response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/nope" } } } },
    400,
    "invalid_value",
    "response_format.json_schema.schema",
  ],
  [
    "tool parameters whose root is not an object, for any model",
    {
      model: "no-such-model",
      tools: [{ type: "function", function: { name: "f", parameters: { type: "string" } } }],
    },
    400,
    "invalid_value",
    "tools[0].function.parameters",
  ],
  [
    "tool parameters with required that is not a list",
    {
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", required: "a" } } }],
    },
    400,
    "invalid_value",
    "tools[0].function.parameters",
  ],
  ["seed fractional", { seed: 1.5 }, 400, "invalid_type", "seed"],
  ["user not a string", { user: 5 }, 400, "invalid_type", "user"],
  ["unknown model", { model: "no-such-model" }, 404, "model_not_found", "model"],
  ["embedding model on the chat endpoint", { model: EMBEDDING_MODEL }, 400, "model_not_supported", "model"],
];

describe("bad input gets its status, type, code and param, never a 500", () => {
  it.each(cases)("%s", async (_name, change, status, code, param) => {
    const response = await post(JSON.stringify({ ...valid, ...change }));
    expect(response.body.error).toMatchObject({ code, param });
    expect(response.status).toBe(status);
    expect(response.body.error.type).toBe("invalid_request_error");
    expect(typeof response.body.error.message).toBe("string");
    expect(response.headers.get("x-request-id")).toMatch(/\S/);
  });

  it("repeats at most 256 characters of an unknown model's name (regression: an 8 MB name, an 8 MB 404)", async () => {
    const response = await post(JSON.stringify({ ...valid, model: "m".repeat(50_000) }));
    expect(response.status).toBe(404);
    expect(response.body.error.message).toBe(
      `The model '${"m".repeat(256)}...' does not exist. List the models with GET /v1/models.`,
    );
  });

  // Regression (fuzzing): these repeated the client's text whole (a 7 MB $ref, a 7 MB 400).
  it("repeats at most 256 characters of a schema's $ref or required name, a model path or an unknown URL", async () => {
    const long = "L".repeat(5_000);
    const schemaRefusals = [
      { $ref: `#/$defs/${long}` },
      { type: "object", properties: {}, required: [long], additionalProperties: false },
    ];
    for (const schema of schemaRefusals) {
      const response = await post(
        JSON.stringify({
          ...valid,
          response_format: { type: "json_schema", json_schema: { name: "s", schema } },
        }),
      );
      expect(response.status).toBe(400);
      const message = String(response.body.error.message);
      expect(message).toContain("L".repeat(200));
      expect(message.length).toBeLessThan(700);
    }
    const headers = { authorization: `Bearer ${server().starterKey}` };
    for (const path of [`/models/${long}`, `/nope/${long}`]) {
      const response = await fetch(`${server().baseUrl}${path}`, { headers });
      expect(response.status).toBe(404);
      const { error } = (await response.json()) as { error: { message: string } };
      expect(error.message).toContain("L".repeat(200));
      expect(error.message.length).toBeLessThan(700);
    }
  });

  it("words lengths and counts plainly, not in the validator's phrasing", async () => {
    const phrased = async (change: Record<string, unknown>) =>
      (await post(JSON.stringify({ ...valid, ...change }))).body.error.message;
    expect(await phrased({ user: "u".repeat(257) })).toBe(
      "Invalid value for 'user': at most 256 characters; send a shorter one.",
    );
    expect(await phrased({ messages: [] })).toBe("Invalid 'messages': expected a non-empty array.");
    expect(await phrased({ model: TINY_MODEL, reasoning_effort: "" })).toBe(
      "Invalid value for 'reasoning_effort': it must not be empty.",
    );
  });

  it("names a wrong type as a type, listing what each field takes (regression: 'Invalid value ... or a null')", async () => {
    const phrased = async (change: Record<string, unknown>) =>
      (await post(JSON.stringify({ ...valid, ...change }))).body.error.message;
    // Null only where the message's role takes it: an assistant's (with tool_calls).
    expect(await phrased({ messages: [{ role: "user", content: 5 }] })).toBe(
      "Invalid type for 'messages[0].content': expected a string or an array.",
    );
    expect(
      await phrased({
        messages: [
          { role: "user", content: "Hi" },
          { role: "assistant", content: 5 },
        ],
      }),
    ).toBe("Invalid type for 'messages[1].content': expected a string, an array or null.");
    expect(await phrased({ temperature: "1" })).toBe(
      "Invalid type for 'temperature': expected a number or null.",
    );
  });

  it("refuses a number too large for a double (1e400) as a value out of range, not a wrong type", async () => {
    const body = (field: string, value: string) =>
      `{"model":"${TINY_MODEL}","messages":[{"role":"user","content":"Hi"}],"${field}":${value}}`;
    for (const [field, value] of [
      ["temperature", "1e400"],
      ["seed", "-1e400"],
      ["max_tokens", "1e999"],
    ] as const) {
      const { status, body: answer } = await post(body(field, value));
      expect(status).toBe(400);
      expect(answer.error).toMatchObject({
        code: "invalid_value",
        param: field,
        message: `Invalid value for '${field}': the number is too large for a double (beyond ±1.8e308); send a finite one.`,
      });
    }
    // Where no number is wanted, it is the wrong type it always was.
    const { body: content } = await post(
      `{"model":"${TINY_MODEL}","messages":[{"role":"user","content":1e400}]}`,
    );
    expect(content.error).toMatchObject({
      code: "invalid_type",
      message: "Invalid type for 'messages[0].content': expected a string or an array.",
    });
  });

  it("refuses schemas nested beyond any real one, naming the field, and bodies nested far deeper whole", async () => {
    const messages = JSON.stringify(valid.messages);
    // Past the schemas' 64 levels, within the body's 128: the field is named.
    const deep = JSON.stringify(nested(100));
    const tools = await post(
      `{"model":"${TINY_MODEL}","messages":${messages},"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]}`,
    );
    expect(tools.status).toBe(400);
    expect(tools.body.error).toMatchObject({ code: "invalid_value", param: "tools[0].function.parameters" });
    const format = await post(
      `{"model":"${TINY_MODEL}","messages":${messages},"response_format":{"type":"json_schema","json_schema":{"name":"deep","schema":${deep}}}}`,
    );
    expect(format.status).toBe(400);
    expect(format.body.error).toMatchObject({
      code: "invalid_value",
      param: "response_format.json_schema.schema",
    });
    // Deeper than JSON.stringify goes on Node 24 (about 5,000), within the 64 KiB body limit:
    // refused before parsing, as any body nested more than 128 levels is.
    const depth = 10_000;
    const deeper = `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
    const whole = await post(
      `{"model":"${TINY_MODEL}","messages":${messages},"tools":[{"type":"function","function":{"name":"f","parameters":${deeper}}}]}`,
    );
    expect(whole.status).toBe(400);
    expect(whole.body.error).toMatchObject({ code: "invalid_json", param: null });
  });

  it("accepts a schema nested 64 deep", async () => {
    const response = await post(
      JSON.stringify({
        ...valid,
        tools: [{ type: "function", function: { name: "f", parameters: nested(64) } }],
      }),
    );
    expect(response.status).toBe(200);
  });

  it("bounds tool call ids and tool descriptions, which a local prompt renders whole", async () => {
    /** A call and its result, with these ids. */
    const answered = (callId: string, resultId: string) =>
      JSON.stringify({
        ...valid,
        messages: [
          { role: "user", content: "Hi" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: callId, type: "function", function: { name: "f", arguments: "{}" } }],
          },
          { role: "tool", tool_call_id: resultId, content: "done" },
        ],
      });
    const withId = await post(answered("call_1", "c".repeat(1025)));
    expect(withId.status).toBe(400);
    expect(withId.body.error).toMatchObject({ code: "invalid_value", param: "messages[2].tool_call_id" });
    const withDescription = await post(
      JSON.stringify({
        ...valid,
        tools: [{ type: "function", function: { name: "f", description: "d".repeat(32 * 1024 + 1) } }],
      }),
    );
    expect(withDescription.status).toBe(400);
    expect(withDescription.body.error).toMatchObject({
      code: "invalid_value",
      param: "tools[0].function.description",
    });
    const atTheBounds = await post(answered("c".repeat(1024), "c".repeat(1024)));
    expect(atTheBounds.status).toBe(200);
  });

  it("ignores unknown top-level fields", async () => {
    const response = await post(JSON.stringify({ ...valid, model: "no-such-model", frobnicate: true }));
    expect(response.status).toBe(404);
  });

  it("answers invalid JSON with invalid_json", async () => {
    const response = await post('{"model": ');
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "invalid_json",
      type: "invalid_request_error",
      param: null,
    });
  });

  it("answers a body that is not an object with invalid_type", async () => {
    const response = await post("[1, 2]");
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: "invalid_type", param: null });
  });

  it("answers an empty body with invalid_json", async () => {
    const response = await post("");
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe("invalid_json");
  });

  it("answers another content type with invalid_content_type", async () => {
    const response = await post(JSON.stringify(valid), { "content-type": "text/plain" });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "invalid_content_type",
      type: "invalid_request_error",
    });
  });

  it("answers a compressed body with invalid_content_type, naming the encoding", async () => {
    const response = await post(gzipSync(JSON.stringify(valid)), { "content-encoding": "gzip" });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "invalid_content_type",
      type: "invalid_request_error",
    });
    expect(response.body.error.message).toContain("Content-Encoding: gzip");
    // "identity" is no encoding at all.
    const plain = await post(JSON.stringify({ ...valid, model: "no-such-model" }), {
      "content-encoding": "identity",
    });
    expect(plain.status).toBe(404);
  });

  it("answers a body with a transfer coding besides chunked with invalid_content_type (regression: read as JSON, garbage quoted)", async () => {
    const url = new URL(server().origin);
    const socket = connect(Number(url.port), url.hostname);
    socket.on("error", () => {});
    await once(socket, "connect");
    let answer = "";
    socket.on("data", (data: Buffer) => {
      answer += data.toString("latin1");
    });
    const compressed = gzipSync(JSON.stringify(valid));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server().starterKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n`,
    );
    socket.write(`${compressed.length.toString(16)}\r\n`);
    socket.write(compressed);
    socket.end("\r\n0\r\n\r\n");
    await once(socket, "close");
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as {
      error: { code: string; message: string };
    };
    expect(body.error.code).toBe("invalid_content_type");
    expect(body.error.message).toContain("Transfer-Encoding: gzip, chunked");
  });

  it("answers a body over the limit with 413 request_too_large", async () => {
    const response = await post(
      JSON.stringify({ ...valid, messages: [{ role: "user", content: "x".repeat(70 * 1024) }] }),
    );
    expect(response.status).toBe(413);
    expect(response.body.error).toMatchObject({ code: "request_too_large", type: "invalid_request_error" });
    // The limit it went over, and what to do.
    expect(response.body.error.message).toContain("at most 65536 bytes, the server's body_limit");
    expect(response.body.error.message).toContain("send a smaller one");
  });

  it("checks the key before the body: a bad key with bad JSON gets 401", async () => {
    const response = await post("{", { authorization: "Bearer sk-tg-nope" });
    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe("invalid_api_key");
  });

  it("answers unknown paths with 404 not_found in the error shape", async () => {
    for (const [method, path] of [
      ["GET", "/v1/nope"],
      ["POST", "/v1/completions"],
      ["GET", "/v1/chat/completions"],
      ["DELETE", "/v1/models"],
    ] as const) {
      const response = await fetch(`${server().origin}${path}`, {
        method,
        headers: { authorization: `Bearer ${server().starterKey}` },
      });
      expect(response.status).toBe(404);
      const body = (await response.json()) as { error: Record<string, unknown> };
      expect(body.error).toMatchObject({ code: "not_found", type: "invalid_request_error", param: null });
      expect(response.headers.get("x-request-id")).toMatch(/\S/);
    }
  });

  it("answers an unknown path before reading its body: 404, or the admin key's 401/403 (regression: a bad JSON body won, 400)", async () => {
    const send = (method: string, path: string, key: string | undefined, contentEncoding?: string) =>
      fetch(`${server().origin}${path}`, {
        method,
        headers: {
          "content-type": "application/json",
          ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
          ...(contentEncoding === undefined ? {} : { "content-encoding": contentEncoding }),
        },
        body: "{bad",
      });
    const cases: [Promise<Response>, number, string][] = [
      [send("POST", "/v1/embeddings", undefined), 404, "not_found"],
      [send("DELETE", "/v1/models/tiny", server().starterKey), 404, "not_found"],
      [send("PATCH", "/v1/models/tiny", server().starterKey, "gzip"), 404, "not_found"],
      [send("POST", "/admin/nope", undefined), 401, "invalid_api_key"],
      [send("PUT", "/admin/accounts", undefined), 401, "invalid_api_key"],
      [send("POST", "/admin/nope", server().starterKey), 403, "admin_key_required"],
    ];
    for (const [pending, status, code] of cases) {
      const response = await pending;
      const body = (await response.json()) as { error: { code: string } };
      expect({ status: response.status, code: body.error.code }).toEqual({ status, code });
    }
  });

  it("echoes the client's x-request-id", async () => {
    const response = await post(JSON.stringify({ ...valid, model: "nope" }), {
      "x-request-id": "my-request-42",
    });
    expect(response.headers.get("x-request-id")).toBe("my-request-42");
  });
});

import type { LlamaContext, LlamaModel } from "node-llama-cpp";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getSharedLlama } from "../../src/engine/llama/get-shared-llama.ts";
import { generateGreedily } from "../support/generate-greedily.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { EMBEDDING_MODEL, startTestServer, type TestServer, TINY_MODEL } from "../support/test-server.ts";

let server: TestServer;
let client: OpenAI;
/** The tiny model's file loaded apart from the server, to count and generate independently of it. */
let tokenizer: LlamaModel;
let directContext: LlamaContext;

beforeAll(async () => {
  server = await startTestServer({ contextLength: 1024 });
  client = new OpenAI({ baseURL: server.baseUrl, apiKey: server.starterKey, maxRetries: 0 });
  const llama = await getSharedLlama({ gpu: false });
  tokenizer = await llama.loadModel({ modelPath: await getTestModelPath() });
  directContext = await tokenizer.createContext({ contextSize: 1024, threads: 1 });
});

afterAll(async () => {
  await server?.close();
  await directContext?.dispose();
  await tokenizer?.dispose();
});

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: "system", content: "You are a test." },
  { role: "user", content: "Say something." },
];
/** {@link messages} as the tiny model's ChatML template renders them for its answer. */
const renderedMessages =
  "<|im_start|>system\nYou are a test.<|im_end|>\n<|im_start|>user\nSay something.<|im_end|>\n<|im_start|>assistant\n";

/** Greedy generation on a sequence of its own (see generateGreedily). */
async function generateDirectly(
  prompt: string,
  maxTokens: number,
): Promise<{ text: string; tokens: number }> {
  const sequence = directContext.getSequence();
  try {
    return await generateGreedily(sequence, tokenizer, prompt, maxTokens);
  } finally {
    sequence.dispose();
  }
}

describe("non-streamed completions through the openai SDK", () => {
  it("returns the contract's chat.completion shape with exact usage", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 16,
      temperature: 0,
    });
    expect(completion.object).toBe("chat.completion");
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.model).toBe(TINY_MODEL);
    expect(Number.isInteger(completion.created)).toBe(true);
    expect(Math.abs(completion.created - Date.now() / 1000)).toBeLessThan(60);
    expect(completion.choices).toHaveLength(1);
    const [choice] = completion.choices;
    expect(choice?.index).toBe(0);
    expect(choice?.message.role).toBe("assistant");
    // Greedy, the tiny model ends by itself within 16 tokens; its end token counts as generated.
    const direct = await generateDirectly(renderedMessages, 16);
    expect(direct.tokens).toBeLessThan(16);
    expect(choice?.message.content).toBe(direct.text);
    expect(choice?.finish_reason).toBe("stop");
    const promptTokens = tokenizer.tokenize(renderedMessages, true).length;
    expect(completion.usage).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: direct.tokens,
      total_tokens: promptTokens + direct.tokens,
    });
  });

  it("finishes with length when max_tokens is reached, counting exactly max_tokens", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 2,
      temperature: 0,
    });
    expect(completion.choices[0]?.finish_reason).toBe("length");
    expect(completion.usage?.completion_tokens).toBe(2);
  });

  it("finishes with stop when the model ends by itself", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 300,
      temperature: 0,
    });
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage?.completion_tokens).toBeLessThan(300);
  });

  it("accepts max_completion_tokens as max_tokens", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_completion_tokens: 3,
      temperature: 0,
    });
    expect(completion.usage?.completion_tokens).toBeLessThanOrEqual(3);
  });

  it("is deterministic with temperature 0, and with a seed, streamed or not", async () => {
    const greedy = async () =>
      (await client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 24, temperature: 0 }))
        .choices[0]?.message.content;
    expect(await greedy()).toBe(await greedy());
    const seeded = { model: TINY_MODEL, messages, max_tokens: 24, temperature: 1, seed: 1234 };
    const plain = (await client.chat.completions.create(seeded)).choices[0]?.message.content;
    let streamed = "";
    for await (const chunk of await client.chat.completions.create({ ...seeded, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
    }
    expect(streamed).toBe(plain);
  });

  it("answers a prompt over the context with 400 context_length_exceeded", async () => {
    const error = await client.chat.completions
      .create({ model: TINY_MODEL, messages, max_tokens: 2000 })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded");
  });

  // Regression: a bare "Unknown request URL" for the APIs SDKs call by default for some models.
  it("tells a client of the Responses, Completions and Embeddings APIs what Tollgate serves instead", async () => {
    const responses = await client.responses
      .create({ model: TINY_MODEL, input: "hi" })
      .catch((caught: unknown) => caught);
    expect(responses).toBeInstanceOf(OpenAI.NotFoundError);
    expect((responses as InstanceType<typeof OpenAI.NotFoundError>).message).toMatch(
      /POST \/v1\/responses\. Tollgate serves the Chat Completions API .*openai\.chat\(model\)/,
    );
    const completions = await client.completions
      .create({ model: TINY_MODEL, prompt: "hi" })
      .catch((caught: unknown) => caught);
    expect((completions as Error).message).toMatch(/not the legacy Completions API/);
    const embeddings = await client.embeddings
      .create({ model: TINY_MODEL, input: "hi" })
      .catch((caught: unknown) => caught);
    expect((embeddings as Error).message).toMatch(/does not serve embeddings/);
    const other = await fetch(`${server.baseUrl}/responsesX`, { method: "POST" });
    expect(((await other.json()) as { error: { message: string } }).error.message).toBe(
      "Unknown request URL: POST /v1/responsesX.",
    );
  });

  // Regression: a base URL without /v1 (or with it where the path adds it again) got a bare
  // "Unknown request URL".
  it("tells a client whose base URL lacks /v1, or repeats it, the path Tollgate serves", async () => {
    const root = server.baseUrl.replace(/\/v1$/, "");
    const without = new OpenAI({ baseURL: root, apiKey: server.starterKey, maxRetries: 0 });
    const missing = await without.chat.completions
      .create({ model: TINY_MODEL, messages })
      .catch((caught: unknown) => caught);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as Error).message).toContain(
      "Unknown request URL: POST /chat/completions. Tollgate's API is under /v1 (/v1/chat/completions): end the client's base URL in /v1, as in http://HOST:PORT/v1.",
    );
    const models = await without.models.retrieve("org/model:tag").catch((caught: unknown) => caught);
    expect((models as Error).message).toContain("Tollgate's API is under /v1 (/v1/models/org%2Fmodel:tag)");
    const twice = await fetch(`${server.baseUrl}/v1/chat/completions`, { method: "POST" });
    expect(twice.status).toBe(404);
    expect(((await twice.json()) as { error: { message: string } }).error.message).toBe(
      "Unknown request URL: POST /v1/v1/chat/completions. The path has /v1 twice: the client's base URL ends in /v1 and the path adds it again; use /v1/chat/completions.",
    );
    const responses = await fetch(`${root}/responses`, { method: "POST" });
    expect(((await responses.json()) as { error: { message: string } }).error.message).toMatch(
      /under \/v1 \(\/v1\/responses\).*not the Responses API/,
    );
    // Not where the path it would name does not serve the method either, nor for a huge path.
    for (const [method, path] of [
      ["GET", "/chat/completions"],
      ["POST", "/models"],
      ["DELETE", "/v1/v1/models"],
      ["GET", `/models/${"m".repeat(300)}`],
    ]) {
      const wrong = await fetch(`${root}${path}`, { method });
      // At most 256 characters of the path are repeated.
      const shown = (path ?? "").length > 256 ? `${path?.slice(0, 256)}...` : path;
      expect(((await wrong.json()) as { error: { message: string } }).error.message).toBe(
        `Unknown request URL: ${method} ${shown}.`,
      );
    }
    const unrelated = await fetch(`${root}/chat/completionsX`, { method: "POST" });
    expect(((await unrelated.json()) as { error: { message: string } }).error.message).toBe(
      "Unknown request URL: POST /chat/completionsX.",
    );
  });

  it("returns 404 model_not_found for an unknown model", async () => {
    const error = await client.chat.completions
      .create({ model: "no-such-model", messages })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });
});

describe("streamed completions through the openai SDK", () => {
  it("streams a role chunk, content chunks and a final chunk, then a usage chunk", async () => {
    const stream = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const first = chunks[0]!;
    expect(first.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    const final = chunks.at(-2)!;
    expect(final.choices[0]?.delta).toEqual({});
    expect(["stop", "length"]).toContain(final.choices[0]?.finish_reason);
    for (const chunk of chunks) {
      expect(chunk.object).toBe("chat.completion.chunk");
      expect(chunk.id).toBe(first.id);
      expect(chunk.created).toBe(first.created);
      expect(chunk.model).toBe(TINY_MODEL);
    }
    const contentChunks = chunks.slice(1, -2);
    for (const chunk of contentChunks) {
      expect(chunk.choices[0]?.finish_reason).toBeNull();
      expect(typeof chunk.choices[0]?.delta.content).toBe("string");
    }
    expect(usageChunk.usage?.completion_tokens).toBeGreaterThan(0);
    expect(usageChunk.usage?.completion_tokens).toBeLessThanOrEqual(12);
  });
});

describe("the SSE wire format", () => {
  async function streamRaw(body: Record<string, unknown>) {
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages, stream: true, ...body }),
    });
    return { response, text: await response.text() };
  }

  it("frames every event as `data: <json>` and ends with `data: [DONE]`", async () => {
    const { response, text } = await streamRaw({ max_tokens: 6 });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("x-request-id")).toMatch(/\S/);
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = text.split("\n\n").filter((event) => event !== "");
    for (const event of events) expect(event).toMatch(/^data: /);
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.slice(6)) as Record<string, unknown>);
    for (const chunk of chunks) expect(chunk).not.toHaveProperty("usage");
    const last = chunks.at(-1) as { choices: { delta: unknown; finish_reason: unknown }[] };
    expect(last.choices[0]?.delta).toEqual({});
    expect(last.choices[0]?.finish_reason).toBe("length");
  });

  it("with include_usage sends usage: null on chunks and a last chunk with choices: [] before [DONE]", async () => {
    const { text } = await streamRaw({ max_tokens: 4, stream_options: { include_usage: true } });
    const events = text.split("\n\n").filter((event) => event !== "");
    expect(events.at(-1)).toBe("data: [DONE]");
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.slice(6)) as Record<string, unknown>);
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toMatchObject({ completion_tokens: 4 });
    for (const chunk of chunks.slice(0, -1)) expect(chunk.usage).toBeNull();
  });

  it("answers errors before the stream starts with a status and the error shape, not SSE", async () => {
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages, stream: true, max_tokens: 5000 }),
    });
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
      "context_length_exceeded",
    );
  });
});

describe("a base URL written with a trailing slash", () => {
  it("finds the routes when a client joins it to a path (/v1//chat/completions, /v1//models)", async () => {
    const completion = await fetch(`${server.baseUrl}//chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 2 }),
    });
    expect(completion.status).toBe(200);
    expect(((await completion.json()) as { object: string }).object).toBe("chat.completion");
    const models = await fetch(`${server.baseUrl}//models`, {
      headers: { authorization: `Bearer ${server.starterKey}` },
    });
    expect(models.status).toBe(200);
    expect(((await models.json()) as { object: string }).object).toBe("list");
  });
});

describe("tools and JSON output", () => {
  const weatherTool: OpenAI.Chat.ChatCompletionTool = {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the weather for a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city", "days"],
      },
    },
  };
  const timeTool: OpenAI.Chat.ChatCompletionTool = {
    type: "function",
    function: {
      name: "get_time",
      parameters: {
        type: "object",
        properties: { zone: { type: "string", enum: ["UTC", "CET"] } },
        required: ["zone"],
      },
    },
  };

  it("calls the named function with arguments that parse", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [weatherTool, timeTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 200,
      seed: 3,
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const calls = choice.message.tool_calls!;
    expect(calls).toHaveLength(1);
    const call = calls[0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.type).toBe("function");
    expect(call.id).toMatch(/\S/);
    expect(call.function.name).toBe("get_weather");
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    expect(typeof args.city).toBe("string");
    expect(Number.isInteger(args.days)).toBe(true);
  });

  it("with tool_choice required calls one of the tools", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [weatherTool, timeTool],
      tool_choice: "required",
      max_tokens: 200,
      seed: 5,
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(["get_weather", "get_time"]).toContain(call.function.name);
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    if (call.function.name === "get_time") expect(["UTC", "CET"]).toContain(args.zone);
    else expect(typeof args.city).toBe("string");
  });

  it("streams tool calls as OpenAI deltas that add up to parseable arguments", async () => {
    const stream = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [weatherTool],
      tool_choice: "required",
      max_tokens: 200,
      stream: true,
      seed: 9,
    });
    let id: string | undefined;
    let name: string | undefined;
    let args = "";
    let finish: string | null | undefined;
    let deltas = 0;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const call of choice?.delta.tool_calls ?? []) {
        deltas++;
        expect(call.index).toBe(0);
        if (call.id !== undefined) {
          expect(id).toBeUndefined();
          id = call.id;
          name = call.function?.name;
          expect(call.type).toBe("function");
        }
        args += call.function?.arguments ?? "";
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    expect(id).toMatch(/\S/);
    expect(name).toBe("get_weather");
    expect(deltas).toBeGreaterThan(1);
    expect(JSON.parse(args)).toHaveProperty("city");
    expect(finish).toBe("tool_calls");
  });

  it("continues a conversation that holds tool calls and tool results", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Oslo","days":1}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "Sunny, 20 C" },
      ],
      tools: [weatherTool],
      tool_choice: "none",
      max_tokens: 8,
    });
    expect(completion.choices[0]?.message.tool_calls).toBeUndefined();
    expect(["stop", "length"]).toContain(completion.choices[0]?.finish_reason);
  });

  it("with tool_choice auto offers the tools and returns text or well-formed tool calls, never both", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [weatherTool],
      max_tokens: 40,
      seed: 1,
    });
    // The tools are documented in the prompt.
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(
      tokenizer.tokenize(renderedMessages, true).length + 50,
    );
    const choice = completion.choices[0]!;
    if (choice.finish_reason === "tool_calls") {
      expect(choice.message.tool_calls?.length).toBeGreaterThan(0);
      for (const call of choice.message.tool_calls ?? []) {
        expect(call).toMatchObject({ type: "function", function: { name: "get_weather" } });
        JSON.parse((call as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments);
      }
    } else {
      expect(["stop", "length"]).toContain(choice.finish_reason);
      expect(choice.message.tool_calls).toBeUndefined();
      expect(choice.message.content).toMatch(/./);
    }
    // What the random-weight test model does with this seed: it answers in text and ends itself.
    expect(choice.finish_reason).toBe("stop");
  });

  it("returns a JSON object for response_format json_object", async () => {
    const completion = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      response_format: { type: "json_object" },
      max_tokens: 300,
      seed: 11,
    });
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    const value: unknown = JSON.parse(completion.choices[0]?.message.content ?? "");
    expect(typeof value).toBe("object");
  });

  it("returns JSON matching the schema for response_format json_schema, streamed too", async () => {
    const format: OpenAI.ResponseFormatJSONSchema = {
      type: "json_schema",
      json_schema: {
        name: "person",
        strict: true,
        schema: {
          type: "object",
          properties: {
            name: { type: "string" },
            age: { type: "integer" },
            tags: { type: "array", items: { type: "string" } },
          },
          required: ["name", "age", "tags"],
          additionalProperties: false,
        },
      },
    };
    let text = "";
    for await (const chunk of await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      response_format: format,
      max_tokens: 300,
      stream: true,
      seed: 13,
    })) {
      text += chunk.choices[0]?.delta.content ?? "";
    }
    const value = JSON.parse(text) as Record<string, unknown>;
    expect(typeof value.name).toBe("string");
    expect(Number.isInteger(value.age)).toBe(true);
    expect(Array.isArray(value.tags)).toBe(true);
  });
});

describe("models through the openai SDK", () => {
  it("lists the catalogue with kind, pricing, context length and status", async () => {
    const page = await client.models.list();
    const models = page.data as unknown as Record<string, unknown>[];
    expect(models.map((model) => model.id)).toEqual([TINY_MODEL, EMBEDDING_MODEL]);
    expect(models[0]).toEqual({
      id: TINY_MODEL,
      object: "model",
      created: 1_700_000_000,
      owned_by: "tollgate",
      kind: "chat",
      pricing: { input_per_million: "0.10", output_per_million: "0.40" },
      context_length: 1024,
      status: "available",
    });
    expect(models[1]).toMatchObject({ kind: "embedding", pricing: { per_million: "0.02" } });
  });

  it("retrieves a model whose id holds / and :, the same object as in the list", async () => {
    const model = await client.models.retrieve(EMBEDDING_MODEL);
    const listed = (await client.models.list()).data.find((entry) => entry.id === EMBEDDING_MODEL);
    expect(model).toEqual(listed);
    const raw = await fetch(`${server.baseUrl}/models/${EMBEDDING_MODEL}`, {
      headers: { authorization: `Bearer ${server.starterKey}` },
    });
    expect(await raw.json()).toEqual(listed);
  });

  it("answers an unknown model with 404 model_not_found", async () => {
    const error = await client.models.retrieve("nope/nope:1").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });
});

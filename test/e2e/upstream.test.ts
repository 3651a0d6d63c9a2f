import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  answerError,
  answerJson,
  chatCompletion,
  chunk,
  type MockUpstream,
  startMockUpstream,
  streamText,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { findFreePort } from "../support/free-port.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

/** The catalogue id clients use; the upstream knows the model by another name. */
const REMOTE = "acme/remote:v1";
const REMOTE_UPSTREAM_NAME = "upstream-gpt";
const DOWN = "remote-down";
/** The same upstream under another id, whose endpoint's rests leave REMOTE's alone. */
const REASONING = "remote-reasoning";
const UPSTREAM_KEY = "sk-upstream-secret-abcdef";

let upstream: MockUpstream;
let server: TestServer;
let client: OpenAI;

function remoteModel(id: string, baseUrl: string): CatalogModel {
  return createUpstreamModelEntry(id, baseUrl, { apiKey: UPSTREAM_KEY, upstreamModel: REMOTE_UPSTREAM_NAME });
}

beforeAll(async () => {
  upstream = await startMockUpstream();
  const closedPort = await findFreePort();
  server = await startTestServer({
    extraModels: [
      remoteModel(REMOTE, upstream.baseUrl),
      remoteModel(DOWN, `http://127.0.0.1:${closedPort}/v1`),
      createUpstreamModelEntry(REASONING, upstream.baseUrl, { tuning: { maxRetries: 1 } }),
    ],
  });
  client = new OpenAI({ baseURL: server.baseUrl, apiKey: server.starterKey, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.requests.length = 0;
  upstream.handle(streamText(["Hello", " from", " upstream"], { usage: [17, 3] }));
});

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Hi there" }];

async function postRaw(body: Record<string, unknown>) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("a model routed upstream, through the openai SDK", () => {
  it("lists the model as available", async () => {
    const model = await client.models.retrieve(REMOTE);
    expect(model).toMatchObject({ id: REMOTE, owned_by: "acme", status: "available", context_length: 8192 });
  });

  it("answers a plain request with the catalogue id and the upstream's usage", async () => {
    const completion = await client.chat.completions.create({ model: REMOTE, messages, max_tokens: 20 });
    expect(completion.model).toBe(REMOTE);
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.choices[0]?.message.content).toBe("Hello from upstream");
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage).toEqual({ prompt_tokens: 17, completion_tokens: 3, total_tokens: 20 });
    const [received] = upstream.requests;
    expect(received?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(received?.body).toMatchObject({
      model: REMOTE_UPSTREAM_NAME,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 20,
      messages: [{ role: "user", content: "Hi there" }],
    });
  });

  it("passes schemas beyond what a local grammar enforces on to the upstream, which takes them", async () => {
    const parameters = {
      type: "object",
      properties: {
        content: { type: "string", maxLength: 100_000 },
        item: { $ref: "https://x.example/p.json" },
      },
    };
    const response = await postRaw({
      model: REMOTE,
      messages,
      tools: [{ type: "function", function: { name: "write_file", parameters } }],
      response_format: {
        type: "json_schema",
        json_schema: { name: "page", schema: { type: "array", maxItems: 10_000 } },
      },
    });
    expect(response.status).toBe(200);
    expect(upstream.requests.at(-1)?.body).toMatchObject({
      tools: [{ type: "function", function: { name: "write_file", parameters } }],
      response_format: { json_schema: { schema: { type: "array", maxItems: 10_000 } } },
    });
  });

  it("streams chunks with the usage chunk last", async () => {
    const stream = await client.chat.completions.create({
      model: REMOTE,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    const finishReasons: (string | null | undefined)[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const event of stream) {
      expect(event.model).toBe(REMOTE);
      text += event.choices[0]?.delta.content ?? "";
      if (event.choices[0]?.finish_reason) finishReasons.push(event.choices[0].finish_reason);
      if (event.usage) usage = event.usage;
    }
    expect(text).toBe("Hello from upstream");
    expect(finishReasons).toEqual(["stop"]);
    expect(usage).toEqual({ prompt_tokens: 17, completion_tokens: 3, total_tokens: 20 });
  });

  it("passes the upstream's usage breakdowns on, plain and streamed, and none with estimated counts", async () => {
    const events = textEvents(["Hello"], { usage: undefined });
    events.push({
      ...events[0],
      choices: [],
      usage: {
        prompt_tokens: 50,
        completion_tokens: 20,
        total_tokens: 70,
        prompt_tokens_details: { cached_tokens: 10, audio_tokens: 0, made_up_tokens: 3 },
        completion_tokens_details: { reasoning_tokens: 5, accepted_prediction_tokens: 99 },
      },
    });
    upstream.handle((_request, response) => writeEvents(response, events));
    const expected = {
      prompt_tokens: 50,
      completion_tokens: 20,
      total_tokens: 70,
      // Only OpenAI's names, each within the count it breaks down.
      prompt_tokens_details: { cached_tokens: 10, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 5 },
    };
    const completion = await client.chat.completions.create({ model: REMOTE, messages });
    expect(completion.usage).toEqual(expected);
    const stream = await client.chat.completions.create({
      model: REMOTE,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const event of stream) if (event.usage) usage = event.usage;
    expect(usage).toEqual(expected);

    // A report that leaves the completion uncounted: Tollgate estimates it, and shows no breakdown.
    const partial = events.slice(0, -1);
    partial.push({
      ...events[0],
      choices: [],
      usage: { prompt_tokens: 50, prompt_tokens_details: { cached_tokens: 10 } },
    });
    upstream.handle((_request, response) => writeEvents(response, partial));
    const estimated = await client.chat.completions.create({ model: REMOTE, messages });
    expect(estimated.usage).not.toHaveProperty("prompt_tokens_details");
    expect(estimated.usage).not.toHaveProperty("completion_tokens_details");
  });

  it("counts no run still under way once requests have ended, plain and streamed", async () => {
    await client.chat.completions.create({ model: REMOTE, messages, max_tokens: 20 });
    const stream = await client.chat.completions.create({ model: REMOTE, messages, stream: true });
    for await (const _event of stream);
    // The engine's count of runs is what a reload waits for before it closes a replaced engine.
    const running = async () => {
      const metrics = await (await fetch(`${server.origin}/metrics`)).text();
      return new RegExp(`tollgate_model_requests\\{model="${REMOTE}",state="running"\\} (\\d+)`).exec(
        metrics,
      )?.[1];
    };
    await expect.poll(running).toBe("0");
  });

  it("returns tool calls, plain and streamed", async () => {
    upstream.handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({
          tool_calls: [
            { index: 0, id: "call_w", type: "function", function: { name: "get_weather", arguments: "" } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
        chunk({}, "stop"),
      ]),
    );
    const tools: OpenAI.Chat.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    ];
    const toolChoice = { type: "function", function: { name: "get_weather" } } as const;
    const completion = await client.chat.completions.create({
      model: REMOTE,
      messages,
      tools,
      tool_choice: toolChoice,
    });
    expect(completion.choices[0]?.finish_reason).toBe("tool_calls");
    expect(completion.choices[0]?.message.tool_calls).toEqual([
      { id: "call_w", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
    ]);
    // No usage came from the upstream: Tollgate estimated it.
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
    expect(upstream.requests[0]?.body).toMatchObject({ tool_choice: toolChoice, tools });

    const stream = client.chat.completions.stream({
      model: REMOTE,
      messages,
      tools,
      tool_choice: toolChoice,
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      id: "call_w",
      function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
    });
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
  });
});

describe("messages as client libraries send them, to a model routed upstream", () => {
  it("takes null inside messages and tools as absent, and passes text parts on as parts", async () => {
    // A history as openai-python's model_dump() stores it (every unset field null), content parts.
    const response = await postRaw({
      model: REMOTE,
      messages: [
        {
          role: "system",
          content: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "line one" },
            { type: "text", text: "line two" },
          ],
          name: null,
        },
        {
          role: "assistant",
          content: null,
          refusal: null,
          function_call: null,
          audio: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: "{}" } }],
        },
        { role: "tool", content: "sunny", tool_call_id: "call_1" },
        { role: "assistant", content: "Sunny.", tool_calls: null, name: null },
        { role: "user", content: "Thanks" },
      ],
      tools: [{ type: "function", function: { name: "weather", description: null, parameters: null } }],
      stream: true,
      stream_options: { include_usage: null },
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("data: [DONE]");
    expect(upstream.requests[0]?.body.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Be brief." }] },
      {
        role: "user",
        content: [
          { type: "text", text: "line one" },
          { type: "text", text: "line two" },
        ],
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: "{}" } }],
      },
      { role: "tool", content: "sunny", tool_call_id: "call_1" },
      { role: "assistant", content: "Sunny." },
      { role: "user", content: "Thanks" },
    ]);
  });
});

describe("an upstream model that refuses", () => {
  it("passes the refusal on as OpenAI does, plain and streamed, and bills it", async () => {
    upstream.handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null, refusal: "" }),
        chunk({ refusal: "I'm sorry, " }),
        chunk({ refusal: "I cannot help with that." }),
        chunk({}, "stop"),
      ]),
    );
    const completion = await client.chat.completions.create({ model: REMOTE, messages });
    expect(completion.choices[0]?.message).toMatchObject({
      role: "assistant",
      content: "",
      refusal: "I'm sorry, I cannot help with that.",
    });
    // No usage came: the refusal is what was generated, and is estimated as such.
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({ model: REMOTE, messages, stream: true });
    let refusal = "";
    let content = "";
    for await (const event of stream) {
      refusal += event.choices[0]?.delta.refusal ?? "";
      content += event.choices[0]?.delta.content ?? "";
    }
    expect(refusal).toBe("I'm sorry, I cannot help with that.");
    expect(content).toBe("");
  });

  it("reads the refusal of a whole JSON completion too", async () => {
    upstream.handle(
      answerJson(chatCompletion({ role: "assistant", content: null, refusal: "No." }, { usage: [11, 2] })),
    );
    const completion = await client.chat.completions.create({ model: REMOTE, messages });
    expect(completion.choices[0]?.message.refusal).toBe("No.");
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 2 });
  });
});

describe("an upstream that ignores stream and answers one JSON completion", () => {
  beforeEach(() => {
    upstream.handle(
      answerJson(chatCompletion({ role: "assistant", content: "All at once" }, { usage: [11, 3] })),
    );
  });

  it("still streams to a client that asked for a stream, with the upstream's usage", async () => {
    const stream = await client.chat.completions.create({
      model: REMOTE,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const event of stream) {
      text += event.choices[0]?.delta.content ?? "";
      usage = event.usage ?? usage;
    }
    expect(text).toBe("All at once");
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 3 });
  });

  it("answers a plain request", async () => {
    const completion = await client.chat.completions.create({ model: REMOTE, messages });
    expect(completion.choices[0]).toMatchObject({
      message: { role: "assistant", content: "All at once" },
      finish_reason: "stop",
    });
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
  });
});

describe("upstream failures as the client sees them", () => {
  it("turns an upstream 401 into 503 upstream_unavailable, never the client's 401", async () => {
    upstream.handle(answerError(401, { error: { message: `Incorrect API key provided: ${UPSTREAM_KEY}` } }));
    const response = await postRaw({ model: REMOTE, messages });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBeTruthy();
    const text = await response.text();
    expect(text).not.toContain(UPSTREAM_KEY);
    expect(text).not.toContain("127.0.0.1");
    expect(JSON.parse(text)).toEqual({
      error: {
        message: expect.stringContaining("refused Tollgate's credentials"),
        type: "server_error",
        param: null,
        code: "upstream_unavailable",
      },
    });
  });

  it("passes an upstream 400 on as a 400 with the upstream's reason", async () => {
    upstream.handle(
      answerError(400, { error: { message: "Unsupported parameter: 'seed'.", param: "seed" } }),
    );
    const response = await postRaw({ model: REMOTE, messages, seed: 1 });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: {
        message: expect.stringContaining("Unsupported parameter: 'seed'."),
        type: "invalid_request_error",
        param: "seed",
        code: "invalid_value",
      },
    });
  });

  it("answers 503 with retry-after when the upstream cannot be reached", async () => {
    const response = await postRaw({ model: DOWN, messages });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBeTruthy();
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("upstream_unavailable");
    expect(body.error.message).toContain("refused the connection");
    // The ledger row counts the prompt as Tollgate estimated it, and says so.
    const requestId = response.headers.get("x-request-id");
    const row = (await server.store.listUsage({ model: DOWN })).find(
      (usage) => usage.requestId === requestId,
    );
    expect(row).toMatchObject({ errorCode: "upstream_unavailable", completionTokens: 0, estimated: true });
    expect(row?.promptTokens).toBeGreaterThan(0);
  });

  it("ends a stream that the upstream cuts with an error event and [DONE]", async () => {
    upstream.handle(async (_request, response) => {
      await writeEvents(response, [chunk({ content: "Partial" })], { done: false, end: false });
      setTimeout(() => response.socket?.destroy(), 20);
    });
    const response = await postRaw({ model: REMOTE, messages, stream: true });
    expect(response.status).toBe(200);
    const text = await response.text();
    const events = text.split("\n\n").filter((event) => event !== "");
    expect(events.at(-1)).toBe("data: [DONE]");
    const error = JSON.parse(events.at(-2)?.slice("data: ".length) ?? "{}") as { error: { code: string } };
    expect(error.error.code).toBe("upstream_unavailable");
    expect(text).toContain('"content":"Partial"');
  });

  it("charges a streamed answer the upstream cut for what was sent, and a plain one nothing", async () => {
    upstream.handle(async (_request, response) => {
      await writeEvents(response, [chunk({ content: "Partial words here" })], { done: false, end: false });
      setTimeout(() => response.socket?.destroy(), 20);
    });
    const rowOf = async (requestId: string | null) =>
      (await server.store.listUsage({ model: REMOTE })).find((usage) => usage.requestId === requestId);
    const streamed = await postRaw({ model: REMOTE, messages, stream: true });
    await streamed.text();
    const streamedRow = await rowOf(streamed.headers.get("x-request-id"));
    expect(streamedRow?.completionTokens).toBeGreaterThan(0);
    expect(streamedRow?.costNano).toBeGreaterThan(0n);
    // The plain client gets a 503 and none of the words: they are recorded, not charged.
    const plain = await postRaw({ model: REMOTE, messages });
    expect(plain.status).toBe(503);
    const plainRow = await rowOf(plain.headers.get("x-request-id"));
    expect(plainRow).toMatchObject({ errorCode: "upstream_unavailable", costNano: 0n });
    expect(plainRow?.completionTokens).toBe(streamedRow?.completionTokens);
  });

  // Regression: reasoning streamed before an upstream broke off was recorded as 0 tokens (text
  // is recorded), however many attempts generated it again.
  it("records the reasoning of attempts that broke off before any answer, uncharged, streamed or not", async () => {
    upstream.handle(async (_request, response) => {
      const reasoning = Array.from({ length: 20 }, () => chunk({ reasoning_content: "thinking it over " }));
      await writeEvents(response, [...reasoning, { error: { message: "engine died", code: 500 } }]);
    });
    for (const stream of [false, true]) {
      upstream.requests.length = 0;
      const response = await postRaw({ model: REASONING, messages, stream });
      expect(response.status).toBe(503);
      const row = (await server.store.listUsage({ model: REASONING })).find(
        (usage) => usage.requestId === response.headers.get("x-request-id"),
      );
      expect(row).toMatchObject({ errorCode: "upstream_unavailable", costNano: 0n, estimated: true });
      // Each attempt generated the same reasoning again.
      const attempts = upstream.requests.length;
      expect(attempts).toBeGreaterThan(0);
      expect(row?.completionTokens).toBeGreaterThan(20 * attempts);
      expect((row?.completionTokens ?? 0) % attempts).toBe(0);
    }
  });

  it("aborts the upstream request when the client disconnects", async () => {
    upstream.handle((_request, response) =>
      writeEvents(response, textEvents(Array.from({ length: 500 }, () => " tick")), { delayMs: 10 }),
    );
    const controller = new AbortController();
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: REMOTE, messages, stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    await reader.read();
    controller.abort();
    const closedEarly = await Promise.race([
      upstream.requests[0]!.closedEarly,
      sleep(3_000).then(() => "timeout"),
    ]);
    expect(closedEarly).toBe(true);
  });
});

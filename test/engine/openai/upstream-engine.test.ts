import { afterEach, describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import {
  answerAs,
  answerJson,
  chatCompletion,
  chunk,
  type MockHandler,
  resetAfter,
  streamText,
  textEvents,
  toolCallCompletion,
  usageChunk,
  writeEvents,
} from "./mock-upstream.ts";

const mock = startTestMock;

/** A mock answering with `handler`, and an engine on it that does not retry. */
async function oneTry(handler: MockHandler) {
  const upstream = await mock(handler);
  const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]), settings: { maxRetries: 0 } });
  return { upstream, engine };
}

afterEach(closeEnginesAndMocks);

describe("upstream engine: answers", () => {
  it("streams text and finishes with the upstream's usage, sending the upstream model name", async () => {
    const upstream = await mock(streamText(["Hello", " world"], { usage: [21, 2] }));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl], { upstreamModel: "gpt-4o-mini" }),
    });
    const parts = await collectParts(engine, chatRequest({ maxTokens: 50, seed: 3 }));
    expect(parts).toEqual([
      { type: "text-delta", text: "Hello" },
      { type: "text-delta", text: " world" },
      { type: "finish", reason: "stop", rawReason: "stop", usage: { promptTokens: 21, completionTokens: 2 } },
    ]);
    const [received] = upstream.requests;
    expect(received?.url).toBe("/v1/chat/completions");
    expect(received?.headers.authorization).toBe("Bearer sk-upstream-secret-123456");
    expect(received?.body).toMatchObject({
      model: "gpt-4o-mini",
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 50,
      seed: 3,
      messages: [
        { role: "system", content: "You are a test." },
        { role: "user", content: "Say hello." },
      ],
    });
  });

  it("sends an endpoint's own headers (Azure's api-key) and no Authorization without an api_key", async () => {
    const upstream = await mock(streamText(["Hi"], { usage: [3, 1] }));
    const model = upstreamModel([upstream.baseUrl]);
    if (model.engine?.type !== "openai") throw new Error("an upstream model");
    model.engine.endpoints = [
      {
        baseUrl: upstream.baseUrl,
        apiKey: undefined,
        // Whatever its name (regression: one named __proto__, as the config reads it, never sent).
        headers: Object.defineProperty({ "api-key": "az-secret", "x-title": "Tollgate" }, "__proto__", {
          value: "kept",
          enumerable: true,
        }),
      },
    ];
    const engine = createTestEngine({ model });
    await collectParts(engine);
    const [received] = upstream.requests;
    expect(received?.headers).toMatchObject({
      "api-key": "az-secret",
      "x-title": "Tollgate",
      "content-type": "application/json",
    });
    expect(received?.rawHeaders.join("\n")).toContain("__proto__\nkept");
    expect(received?.headers.authorization).toBeUndefined();
  });

  it("re-assembles streamed tool calls and finishes with tool_calls", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({
          tool_calls: [
            { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
        chunk({
          tool_calls: [
            { index: 1, id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
        }),
        chunk({}, "tool_calls"),
      ]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(
      engine,
      chatRequest({
        tools: [{ name: "get_weather" }, { name: "get_time" }],
        toolChoice: { type: "required" },
      }),
    );
    expect(parts.slice(0, 5)).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_1", name: "get_weather", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"city":' },
      { type: "tool-call-delta", index: 0, argumentsDelta: '"Oslo"}' },
      { type: "tool-call-delta", index: 1, id: "call_2", name: "get_time", argumentsDelta: "" },
      { type: "tool-call-delta", index: 1, argumentsDelta: "{}" },
    ]);
    expect(parts[5]).toMatchObject({ type: "finish", reason: "tool_calls", rawReason: "tool_calls" });
    expect(upstream.requests[0]?.body).toMatchObject({
      tool_choice: "required",
      tools: [
        { type: "function", function: { name: "get_weather" } },
        { type: "function", function: { name: "get_time" } },
      ],
    });
  });

  it("reads a whole chat.completion from an upstream that ignores stream", async () => {
    const upstream = await mock(
      answerJson(
        chatCompletion(
          { role: "assistant", content: "Hello, whole." },
          { finishReason: "length", usage: [12, 4] },
        ),
        "application/json; charset=utf-8",
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(await collectParts(engine)).toEqual([
      { type: "text-delta", text: "Hello, whole." },
      {
        type: "finish",
        reason: "length",
        rawReason: "length",
        usage: { promptTokens: 12, completionTokens: 4 },
      },
    ]);
  });

  it("reads the tool calls of a whole chat.completion, numbered in order", async () => {
    const upstream = await mock(
      answerJson(
        toolCallCompletion(
          { name: "get_weather", arguments: '{"city":"Oslo"}' },
          { name: "get_time", arguments: "{}" },
        ),
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(
      engine,
      chatRequest({ tools: [{ name: "get_weather" }, { name: "get_time" }], toolChoice: { type: "auto" } }),
    );
    expect(parts.slice(0, 4)).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "get_weather", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"city":"Oslo"}' },
      { type: "tool-call-delta", index: 1, id: "call_b", name: "get_time", argumentsDelta: "" },
      { type: "tool-call-delta", index: 1, argumentsDelta: "{}" },
    ]);
    // No usage in the answer: estimated, and said so.
    expect(parts[4]).toMatchObject({ type: "finish", reason: "tool_calls", usage: { estimated: true } });
  });

  it("reads a bare JSON body sent as an event stream: an error's message, or a whole completion", async () => {
    const { upstream, engine } = await oneTry(
      answerAs(
        "text/event-stream",
        '{"error":{"message":"the model is warming up","type":"server_error"}}\n',
      ),
    );
    expect(((await firstError(engine)) as AppError).message).toContain("the model is warming up");

    upstream.handle(
      answerJson(
        chatCompletion({ role: "assistant", content: "Whole" }, { usage: [3, 1] }),
        "text/event-stream",
      ),
    );
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Whole");
    expect(parts.at(-1)).toMatchObject({ type: "finish", usage: { promptTokens: 3, completionTokens: 1 } });
  });

  it("reads a whole chat.completion whose choices is one choice, not a list, streamed or not (regression: its usage charged, its text never sent)", async () => {
    const whole = chatCompletion({ role: "assistant", content: "Bare choice" }, { usage: [7, 2] });
    const bare = { ...whole, choices: (whole.choices as unknown[])[0] };
    for (const contentType of ["application/json", "text/event-stream"]) {
      const { engine } = await oneTry(answerJson(bare, contentType));
      const parts = await collectParts(engine);
      expect(textOf(parts)).toBe("Bare choice");
      expect(parts.at(-1)).toMatchObject({
        type: "finish",
        reason: "stop",
        usage: { promptTokens: 7, completionTokens: 2 },
      });
    }
  });

  it("reads a whole chat.completion sent as an event's data, its text and tool calls in `message` (regression: an empty answer, charged)", async () => {
    const text = chatCompletion({ role: "assistant", content: "In one event" }, { usage: [5, 3] });
    const { upstream, engine } = await oneTry(
      answerAs("text/event-stream", `data: ${JSON.stringify(text)}\n\ndata: [DONE]\n\n`),
    );
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("In one event");
    expect(parts.at(-1)).toMatchObject({ type: "finish", usage: { promptTokens: 5, completionTokens: 3 } });

    const calls = toolCallCompletion({ name: "get_time", arguments: '{"zone":"UTC"}' });
    upstream.handle(answerAs("text/event-stream", `data: ${JSON.stringify(calls)}\n\ndata: [DONE]\n\n`));
    const called = await collectParts(
      engine,
      chatRequest({ tools: [{ name: "get_time" }], toolChoice: { type: "auto" } }),
    );
    expect(called.slice(0, 2)).toEqual([
      { type: "tool-call-delta", index: 0, id: "call_a", name: "get_time", argumentsDelta: "" },
      { type: "tool-call-delta", index: 0, argumentsDelta: '{"zone":"UTC"}' },
    ]);
    // A chunk that calls itself a completion but carries a delta is read as the chunk it is.
    upstream.handle(
      answerAs(
        "text/event-stream",
        `${[
          { ...chunk({ content: "Mis" }), object: "chat.completion" },
          { ...chunk({ content: "labelled" }, "stop"), object: "chat.completion" },
        ]
          .map((event) => `data: ${JSON.stringify(event)}\n\n`)
          .join("")}data: [DONE]\n\n`,
      ),
    );
    expect(textOf(await collectParts(engine))).toBe("Mislabelled");
    // Nor is the whole answer again after chunks that said it, or a message beside a null delta.
    const whole = { ...chatCompletion({ role: "assistant", content: "Hello" }, { usage: [5, 1] }) };
    const events = (...values: unknown[]) =>
      `${values.map((value) => `data: ${JSON.stringify(value)}\n\n`).join("")}data: [DONE]\n\n`;
    upstream.handle(
      answerAs(
        "text/event-stream",
        events(chunk({ content: "Hel" }), chunk({ content: "lo" }, "stop"), whole),
      ),
    );
    expect(textOf(await collectParts(engine))).toBe("Hello");
    upstream.handle(
      answerAs(
        "text/event-stream",
        events(
          { ...chunk({ content: "A" }), object: "chat.completion" },
          {
            ...chunk({}, "stop"),
            object: "chat.completion",
            choices: [
              { index: 0, delta: null, message: { role: "assistant", content: "A" }, finish_reason: "stop" },
            ],
          },
        ),
      ),
    );
    expect(textOf(await collectParts(engine))).toBe("A");
    // A whole answer whose choice has a null delta beside its message, alone: its message is it.
    const nullDelta = {
      ...whole,
      choices: [
        {
          index: 0,
          delta: null,
          message: { role: "assistant", content: "Null delta" },
          finish_reason: "stop",
        },
      ],
    };
    upstream.handle(answerAs("text/event-stream", events(nullDelta)));
    expect(textOf(await collectParts(engine))).toBe("Null delta");
    upstream.handle(answerJson(nullDelta));
    expect(textOf(await collectParts(engine))).toBe("Null delta");
    // An empty delta says no more than a null one (regression: the message's text dropped, charged).
    const [nullChoice] = nullDelta.choices;
    upstream.handle(answerJson({ ...nullDelta, choices: [{ ...nullChoice, delta: {} }] }));
    expect(textOf(await collectParts(engine))).toBe("Null delta");
    // Reasoning streamed, then the whole answer repeating it: counted once (regression: twice, charged twice).
    const reasoning = "word ".repeat(200);
    const estimateAfter = async (repeated: boolean) => {
      const again = chatCompletion({
        role: "assistant",
        content: "Hi",
        ...(repeated ? { reasoning_content: reasoning } : {}),
      });
      upstream.handle(answerAs("text/event-stream", events(chunk({ reasoning_content: reasoning }), again)));
      return (await collectParts(engine)).at(-1);
    };
    const once = await estimateAfter(false);
    expect(once).toMatchObject({ type: "finish", usage: { estimated: true } });
    expect(await estimateAfter(true)).toEqual(once);
    // Reasoning is not the answer: the whole event after it says the answer.
    upstream.handle(
      answerAs("text/event-stream", events(chunk({ reasoning_content: "Let me think." }), whole)),
    );
    expect(textOf(await collectParts(engine))).toBe("Hello");
    // Text, then the whole answer with the tool call the chunks did not send: the call, once.
    const withCall = toolCallCompletion({ name: "get_time", arguments: "{}" });
    const [callChoice] = withCall.choices as { message: Record<string, unknown> }[];
    const textAndCall = {
      ...withCall,
      choices: [{ ...callChoice, message: { ...callChoice?.message, content: "Let me check." } }],
    };
    upstream.handle(answerAs("text/event-stream", events(chunk({ content: "Let me check." }), textAndCall)));
    const checked = await collectParts(
      engine,
      chatRequest({ tools: [{ name: "get_time" }], toolChoice: { type: "auto" } }),
    );
    expect(textOf(checked)).toBe("Let me check.");
    expect(
      checked.filter((part) => part.type === "tool-call-delta" && part.name === "get_time"),
    ).toHaveLength(1);
    expect(checked.at(-1)).toMatchObject({ type: "finish", reason: "tool_calls" });
    // What the chunks did not say of the text comes from the whole answer (regression: dropped,
    // though the whole answer's usage was charged): the rest of it, or all of it after a call.
    upstream.handle(
      answerAs(
        "text/event-stream",
        events(
          chunk({ content: "The answer" }),
          chatCompletion({ role: "assistant", content: "The answer is 42" }),
        ),
      ),
    );
    expect(textOf(await collectParts(engine))).toBe("The answer is 42");
    upstream.handle(
      answerAs(
        "text/event-stream",
        events(
          {
            ...withCall,
            object: "chat.completion.chunk",
            choices: [{ index: 0, delta: callChoice?.message, finish_reason: null }],
          },
          textAndCall,
        ),
      ),
    );
    const afterCall = await collectParts(
      engine,
      chatRequest({ tools: [{ name: "get_time" }], toolChoice: { type: "auto" } }),
    );
    expect(textOf(afterCall)).toBe("Let me check.");
    expect(
      afterCall.filter((part) => part.type === "tool-call-delta" && part.name === "get_time"),
    ).toHaveLength(1);
  });

  // Regression: an event stream labelled application/json was read as one JSON answer, did not
  // parse, and failed (retried, each time generated again upstream), though the SDK reads it.
  it("reads an event stream labelled JSON as the event stream it is", async () => {
    const { upstream, engine } = await oneTry(
      answerAs(
        "application/json",
        `\uFEFF: ping\n\n${[
          chunk({ role: "assistant", content: "Labelled " }),
          chunk({ content: "loosely" }, "stop"),
          usageChunk(6, 2),
        ]
          .map((event) => `data: ${JSON.stringify(event)}\n\n`)
          .join("")}data: [DONE]\n\n`,
      ),
    );
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Labelled loosely");
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
      usage: { promptTokens: 6, completionTokens: 2 },
    });
    expect(upstream.requests).toHaveLength(1);
  });

  it("names the content type of an answer that was neither an event stream nor JSON", async () => {
    const { engine } = await oneTry(
      answerAs("text/html; charset=utf-8", "<html><body>Bad gateway</body></html>"),
    );
    const failure = await firstError(engine);
    expect(failure).toBeInstanceOf(AppError);
    expect((failure as AppError).message).toContain("answered with text/html instead of an event stream");
  });

  it("fails an attempt whose JSON answer is no completion, as it fails an empty stream", async () => {
    const { engine } = await oneTry(answerAs("application/json", '{"status":"ok"}'));
    const failure = await firstError(engine);
    expect(failure).toBeInstanceOf(AppError);
    expect((failure as AppError).code).toBe("upstream_unavailable");
  });

  it("estimates usage, and says so, when the upstream sends none", async () => {
    const upstream = await mock(
      streamText(["The quick brown fox jumps over the lazy dog."], { usage: undefined }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) parts.push(part);
    const finish = parts.at(-1);
    expect(finish).toMatchObject({ type: "finish", reason: "stop", usage: { estimated: true } });
    if (finish?.type !== "finish") throw new Error("no finish");
    expect(finish.usage.promptTokens).toBe(prepared.promptTokens);
    expect(finish.usage.completionTokens).toBeGreaterThanOrEqual(8);
    expect(finish.usage.completionTokens).toBeLessThanOrEqual(14);
  });

  it("finishes when the upstream ends after finish_reason without [DONE]", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, textEvents(["Hi"], { usage: [5, 1] }), { done: false }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toEqual({
      type: "finish",
      reason: "stop",
      rawReason: "stop",
      usage: { promptTokens: 5, completionTokens: 1 },
    });
  });

  it("finishes, with estimated usage, when the connection breaks after finish_reason", async () => {
    // The answer is complete; the usage chunk and [DONE] never come.
    const upstream = await mock(resetAfter(textEvents(["Hi", " there"], { usage: undefined })));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hi there");
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
      usage: { promptTokens: expect.any(Number), estimated: true },
    });
    expect(engine.status()).toBe("available");
  });

  it("counts its runs under way, pauses between retries included, for a reload to wait for", async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let answered = 0;
    // The first answer fails (a retry after a pause follows), the second waits for `release`.
    const upstream = await mock(async (_request, response) => {
      answered += 1;
      if (answered === 1) {
        response.writeHead(500).end();
        return;
      }
      await released;
      await writeEvents(response, textEvents(["done"]));
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { retryBaseDelayMs: 200, retryMaxDelayMs: 200 },
    });
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
    const prepared = await engine.prepare(chatRequest());
    const iterator = prepared.run(new AbortController().signal)[Symbol.asyncIterator]();
    const first = iterator.next();
    // While the first attempt fails and the run pauses before its retry, it still runs.
    while (upstream.requests.length < 1) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(engine.load?.()).toEqual({ running: 1, waiting: 0 });
    while (upstream.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(engine.load?.()).toEqual({ running: 1, waiting: 0 });
    release();
    await first;
    while (!(await iterator.next()).done) {}
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
  });

  it("keeps the upstream connection alive between requests", async () => {
    const upstream = await mock(streamText(["a"]));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    for (let index = 0; index < 6; index++) await collectParts(engine);
    const ports = new Set(upstream.requests.map((request) => request.clientPort));
    expect(upstream.requests).toHaveLength(6);
    // undici frees a connection a tick after its response ends, so two may alternate.
    expect(ports.size).toBeLessThanOrEqual(2);
  });

  it("finishes at [DONE] without waiting for a body that does not end, then drops its connection", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, textEvents(["Hello"]), { end: false }),
    );
    // Silence after [DONE] is not the answer's: a minute of idle timeout would be waited for.
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { idleTimeoutMs: 60_000 },
    });
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { completionTokens: 1 } });
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("still reads a body that ends soon after [DONE], keeping its connection", async () => {
    const upstream = await mock(async (_request, response) => {
      await writeEvents(response, [...textEvents(["a"])], { end: false });
      // Something more, and the end, a moment after [DONE].
      setTimeout(() => response.end(": bye\n\n"), 20);
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("a");
    expect(await upstream.requests[0]?.closedEarly).toBe(false);
  });

  it("balances round-robin over healthy endpoints", async () => {
    const first = await mock(streamText(["one"]));
    const second = await mock(streamText(["two"]));
    const engine = createTestEngine({ model: upstreamModel([first.baseUrl, second.baseUrl]) });
    const texts: string[] = [];
    for (let index = 0; index < 4; index++) texts.push(textOf(await collectParts(engine)));
    expect(texts).toEqual(["one", "two", "one", "two"]);
  });
});

describe("upstream engine: prepare", () => {
  it("reserves max_tokens, else the rest of the context, else the default cap", async () => {
    const upstream = await mock();
    const withContext = createTestEngine({
      model: upstreamModel([upstream.baseUrl], { contextLength: 1000 }),
    });
    const prepared = await withContext.prepare(chatRequest());
    expect(prepared.promptTokens).toBeGreaterThan(5);
    expect(prepared.maxCompletionTokens).toBe(1000 - prepared.promptTokens);
    expect((await withContext.prepare(chatRequest({ maxTokens: 7 }))).maxCompletionTokens).toBe(7);
    const withoutContext = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect((await withoutContext.prepare(chatRequest())).maxCompletionTokens).toBe(4096);
    expect(withContext.contextLength).toBe(1000);
    expect(withContext.supportsMultipleChoices).toBe(false);
  });

  it("refuses a prompt over the catalogue's context length", async () => {
    const upstream = await mock();
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { contextLength: 50 }) });
    const long = chatRequest({ messages: [{ role: "user", content: "word ".repeat(100) }] });
    await expect(engine.prepare(long)).rejects.toMatchObject({
      code: "context_length_exceeded",
      status: 400,
    });
    await expect(engine.prepare(chatRequest({ maxTokens: 49 }))).rejects.toMatchObject({
      code: "context_length_exceeded",
    });
    expect(upstream.requests).toHaveLength(0);
  });

  it("says that a response format's schema and the tools count toward the prompt (regression: messages alone)", async () => {
    const upstream = await mock();
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { contextLength: 200 }) });
    const properties = Object.fromEntries(
      Array.from({ length: 100 }, (_, index) => [`p${index}`, { type: "string" }]),
    );
    const schema = { type: "object", properties };
    await expect(
      engine.prepare(
        chatRequest({ responseFormat: { type: "json_schema", name: "big", schema, strict: true } }),
      ),
    ).rejects.toThrow(/tokens \(the response format's schema count as part of them\)\. Please reduce/);
    const tool = { name: "lookup", parameters: schema };
    await expect(
      engine.prepare(
        chatRequest({
          maxTokens: 10,
          tools: [tool],
          responseFormat: { type: "json_schema", name: "big", schema, strict: true },
        }),
      ),
    ).rejects.toThrow(
      /in the messages \(the tools' names, descriptions and parameter schemas and the response format's schema count as part of them\), 10 in the completion/,
    );
    expect(upstream.requests).toHaveLength(0);
  });
});

describe("upstream engine: close", () => {
  it("ends a running stream with model_unavailable and refuses new requests", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, textEvents(Array.from({ length: 100 }, () => "x")), { delayMs: 20 }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) {
        parts.push(part);
        if (parts.length === 2) void engine.close();
      }
    expect(parts.at(-1)).toMatchObject({ type: "error", error: { code: "model_unavailable" } });
    expect(engine.status()).toBe("unavailable");
    const error = await engine.prepare(chatRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("model_unavailable");
  });

  it("throws model_unavailable from a run that had not started", async () => {
    const upstream = await mock(streamText(["x"]));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    await engine.close();
    const run = prepared.run(new AbortController().signal)[Symbol.asyncIterator]();
    await expect(run.next()).rejects.toMatchObject({ code: "model_unavailable" });
    expect(await firstError(engine).catch((error: unknown) => error)).toMatchObject({
      code: "model_unavailable",
    });
  });
});

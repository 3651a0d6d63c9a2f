import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine, StreamPart, Usage } from "../../../src/engine/engine.ts";
import { REASONING_ALLOWANCE_TOKENS } from "../../../src/engine/openai/bound-usage.ts";
import { estimatePromptTokens } from "../../../src/engine/openai/estimate-prompt-tokens.ts";
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
  chatCompletion,
  chunk,
  type MockHandler,
  resetAfter,
  sequence,
  streamText,
  textEvents,
  usageChunk,
  writeEvents,
} from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** `event` with `usage` beside its choices, as servers that report usage on every chunk send it. */
function withUsage(event: Record<string, unknown>, usage: Record<string, number>): Record<string, unknown> {
  return { ...event, usage };
}

const ZEROS = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/** Forty words, a chunk each, each chunk passed through `decorate`. */
function words(decorate: (event: Record<string, unknown>, index: number) => Record<string, unknown>) {
  return Array.from({ length: 40 }, (_, index) =>
    decorate(chunk({ content: ` word number ${index}.` }), index),
  );
}

async function engineOn(handler: MockHandler): Promise<ChatEngine> {
  const upstream = await startTestMock(handler);
  return createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
}

/** Runs a request and leaves (aborts) once `leaveAfter` text parts came; returns the usage it ended with. */
async function leaveAfterTexts(engine: ChatEngine, leaveAfter: number) {
  const prepared = await engine.prepare(chatRequest());
  const controller = new AbortController();
  const parts: StreamPart[] = [];
  let texts = 0;
  for await (const batch of prepared.run(controller.signal))
    for (const part of batch) {
      parts.push(part);
      if (part.type === "text-delta" && ++texts === leaveAfter) controller.abort();
    }
  const last = parts.at(-1);
  expect(last).toMatchObject({ type: "finish", reason: "stop", rawReason: "abort" });
  return { promptEstimate: prepared.promptTokens, usage: lastUsage(parts) };
}

function lastUsage(parts: readonly StreamPart[]): Usage {
  const last = parts.at(-1);
  if (last?.type !== "finish" && last?.type !== "error") throw new Error("no finish or error part");
  return last.usage;
}

/** A `chat.completion` whose text is `content`, as one JSON text. */
function wholeCompletion(content: string): string {
  return JSON.stringify(chatCompletion({ role: "assistant", content }, { usage: [7, 2] }));
}

/** Answers 200 with `body` in 16 KiB pieces, labelled `contentType` (none when undefined). */
function answerInPieces(body: string, contentType: string | undefined): MockHandler {
  return async (_request, response) => {
    response.writeHead(200, contentType === undefined ? {} : { "content-type": contentType });
    for (let start = 0; start < body.length; start += 16 * 1024) {
      response.write(body.slice(start, start + 16 * 1024));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    response.end();
  };
}

/** A usage chunk whose completion counts `reasoning` reasoning tokens (`completion_tokens_details`). */
function usageWithReasoning(prompt: number, completion: number, reasoning: number) {
  const event = usageChunk(prompt, completion);
  const usage = event.usage as Record<string, unknown>;
  return { ...event, usage: { ...usage, completion_tokens_details: { reasoning_tokens: reasoning } } };
}

describe("upstream engine: usage reported before the answer ended", () => {
  it("charges a client that left by what was produced, not by the zeros sent on every chunk (regression: 0 tokens, cost 0)", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(
        response,
        [
          withUsage(chunk({ role: "assistant", content: "" }), ZEROS),
          ...words((event) => withUsage(event, ZEROS)),
          withUsage(chunk({}, "stop"), ZEROS),
          usageChunk(10, 200),
        ],
        { delayMs: 20 },
      ),
    );
    const { promptEstimate, usage } = await leaveAfterTexts(engine, 5);
    expect(usage).toMatchObject({ promptTokens: promptEstimate, estimated: true });
    expect(usage.completionTokens).toBeGreaterThanOrEqual(5 * 3);
  });

  it("charges a client that left after an early prompt count for the completion produced (regression: completion 0, cost 0)", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(
        response,
        [
          withUsage(chunk({ role: "assistant", content: "" }), { prompt_tokens: 1000, completion_tokens: 0 }),
          ...words((event) => event),
          chunk({}, "stop"),
          usageChunk(1000, 200),
        ],
        { delayMs: 20 },
      ),
    );
    const { usage } = await leaveAfterTexts(engine, 5);
    expect(usage).toMatchObject({ promptTokens: 1000, estimated: true });
    expect(usage.completionTokens).toBeGreaterThanOrEqual(5 * 3);
  });

  it("charges a complete answer exactly as its final report says, whatever came before it", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(response, [
        withUsage(chunk({ role: "assistant", content: "" }), ZEROS),
        ...words((event) => withUsage(event, ZEROS)),
        withUsage(chunk({}, "stop"), ZEROS),
        usageChunk(10, 200),
      ]),
    );
    expect(lastUsage(await collectParts(engine))).toEqual({ promptTokens: 10, completionTokens: 200 });
  });

  it("estimates a complete answer whose every report, the last included, is zeros (regression: text billed 0)", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(response, [
        withUsage(chunk({ role: "assistant", content: "" }), ZEROS),
        ...words((event) => withUsage(event, ZEROS)),
        withUsage(chunk({}, "stop"), ZEROS),
      ]),
    );
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(new AbortController().signal)) parts.push(...batch);
    const usage = lastUsage(parts);
    expect(usage).toMatchObject({ promptTokens: prepared.promptTokens, estimated: true });
    expect(usage.completionTokens).toBeGreaterThan(40);
  });

  it("keeps an early prompt count when the final report gives only the completion count (regression: prompt estimated)", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(response, [
        withUsage(chunk({ role: "assistant", content: "" }), { prompt_tokens: 1000, completion_tokens: 0 }),
        chunk({ content: "Hello world" }),
        chunk({}, "stop"),
        withUsage({ ...usageChunk(0, 0) }, { completion_tokens: 2 }),
      ]),
    );
    expect(lastUsage(await collectParts(engine))).toEqual({ promptTokens: 1000, completionTokens: 2 });
  });

  it("estimates the completion of a complete answer whose only report came before its text", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(response, [
        withUsage(chunk({ role: "assistant", content: "" }), { prompt_tokens: 1000, completion_tokens: 0 }),
        ...words((event) => event),
        chunk({}, "stop"),
      ]),
    );
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    const usage = lastUsage(parts);
    expect(usage).toMatchObject({ promptTokens: 1000, estimated: true });
    expect(usage.completionTokens).toBeGreaterThanOrEqual(40 * 3);
  });

  it("charges a cut stream the larger of its last report and what it produced", async () => {
    // Counts on every chunk, as vLLM's continuous usage sends them: the last one behind the text.
    const behind = await engineOn(
      resetAfter([
        chunk({ role: "assistant", content: "" }),
        ...words((event) => withUsage(event, { prompt_tokens: 10, completion_tokens: 1 })),
      ]),
    );
    const cut = lastUsage(await collectParts(behind));
    expect(cut).toMatchObject({ promptTokens: 10, estimated: true });
    expect(cut.completionTokens).toBeGreaterThanOrEqual(40 * 3);

    // Counts ahead of the estimate: the upstream's own stand.
    const ahead = await engineOn(
      resetAfter([withUsage(chunk({ content: "Hi" }), { prompt_tokens: 10, completion_tokens: 50 })]),
    );
    expect(lastUsage(await collectParts(ahead))).toEqual({ promptTokens: 10, completionTokens: 50 });
  });
});

/**
 * Writes `events`, then `tail` as it is (the first part of one more event, or what follows the
 * answer), and ends the body.
 */
const endWith =
  (events: readonly unknown[], tail: string): MockHandler =>
  async (_request, response) => {
    await writeEvents(response, events, { done: false, end: false });
    response.end(tail);
  };

describe("upstream engine: a body that ends inside its last event", () => {
  it("keeps a finished answer whose usage chunk was cut (regression: 503, retried, charged nothing)", async () => {
    const upstream = await startTestMock(
      endWith(textEvents(["Hello", " world"], { usage: undefined }), 'data: {"id":"x","usage":{"prom'),
    );
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hello world");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { estimated: true } });
    expect(lastUsage(parts).completionTokens).toBeGreaterThan(0);
    expect(upstream.requests).toHaveLength(1);
  });

  it("still fails an answer cut inside an event before its finish reason", async () => {
    const upstream = await startTestMock(
      endWith([chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" })], 'data: {"choi'),
    );
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
  });

  it("reads a last event the body ended without its blank line", async () => {
    const upstream = await startTestMock(
      endWith(textEvents(["Hi"], { usage: undefined }), `data: ${JSON.stringify(usageChunk(9, 1))}`),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(lastUsage(await collectParts(engine))).toEqual({ promptTokens: 9, completionTokens: 1 });
  });
});

describe("upstream engine: what an upstream sends after its finish reason", () => {
  const engineOn = async (handler: MockHandler) => {
    const upstream = await startTestMock(handler);
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    return { upstream, parts: await collectParts(engine) };
  };

  it("keeps the whole answer when what follows breaks the protocol (regression: 503, charged nothing)", async () => {
    // `[DONE]` with a space after it (the usage came before it): the upstream's own counts.
    const spaced = await engineOn(
      endWith(textEvents(["Hello", " world"], { usage: [12, 2] }), "data: [DONE] \n\n"),
    );
    expect(textOf(spaced.parts)).toBe("Hello world");
    expect(spaced.parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect(lastUsage(spaced.parts)).toEqual({ promptTokens: 12, completionTokens: 2 });
    expect(spaced.upstream.requests).toHaveLength(1);

    // An event that is no JSON before the usage: the answer stands, its usage estimated.
    const junk = await engineOn(
      endWith(textEvents(["Hello", " world"], { usage: undefined }), "data: {oops\n\ndata: [DONE]\n\n"),
    );
    expect(textOf(junk.parts)).toBe("Hello world");
    expect(junk.parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { estimated: true } });
  });

  it("keeps the whole answer when an error follows it", async () => {
    const late = { error: { message: "late error", type: "server_error", code: null, param: null } };
    const { parts } = await engineOn(endWith([...textEvents(["Hello"], { usage: [12, 1] }), late], ""));
    expect(textOf(parts)).toBe("Hello");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect(lastUsage(parts)).toEqual({ promptTokens: 12, completionTokens: 1 });
  });

  it("still fails an answer whose error comes before its finish reason", async () => {
    const early = { error: { message: "broke down", type: "server_error", code: null, param: null } };
    const { parts } = await engineOn(
      endWith([chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" }), early], ""),
    );
    expect(parts.at(-1)).toMatchObject({ type: "error" });
  });
});

describe("upstream engine: a whole JSON answer over 64 KiB where a stream was expected", () => {
  it("reads it, labelled as an event stream or not labelled at all (regression: dropped, and retried)", async () => {
    const content = "z".repeat(200_000);
    for (const contentType of ["text/event-stream", undefined]) {
      const upstream = await startTestMock(answerInPieces(wholeCompletion(content), contentType));
      const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
      const parts = await collectParts(engine);
      expect(textOf(parts)).toBe(content);
      expect(lastUsage(parts)).toEqual({ promptTokens: 7, completionTokens: 2 });
      expect(upstream.requests).toHaveLength(1);
    }
  });

  it("names one that does not parse, rather than saying nothing came", async () => {
    const upstream = await startTestMock(
      answerInPieces(wholeCompletion("z".repeat(100_000)).slice(0, -10), "text/event-stream"),
    );
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const error = await firstError(engine);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).message).toContain("an answer that is not JSON");
  });
});

describe("upstream engine: finish reasons that say the upstream gave up", () => {
  it("ends the answer with an error part and the usage so far, not `stop` (regression: a cut answer passed as whole)", async () => {
    const engine = await engineOn((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "Hi" }),
        chunk({}, "abort"),
        usageChunk(5, 1),
      ]),
    );
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hi");
    expect(parts.at(-1)).toMatchObject({
      type: "error",
      error: { code: "upstream_unavailable" },
      usage: { promptTokens: 5, completionTokens: 1 },
    });
    expect((parts.at(-1) as { error: AppError }).error.message).toContain('finish_reason "abort"');

    const openRouter = await engineOn((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "Hel" }),
        chunk({}, "error"),
      ]),
    );
    const cut = await collectParts(openRouter);
    expect(cut.at(-1)).toMatchObject({ type: "error", usage: { estimated: true } });
    expect((cut.at(-1) as { error: AppError }).error.message).toContain('finish_reason "error"');

    // DeepSeek's, for want of capacity (regression: `stop`, a cut answer passed as whole and charged).
    const deepSeek = await engineOn((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "The first half of" }),
        {
          ...chunk({ content: "" }, "insufficient_system_resource"),
          usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
        },
      ]),
    );
    const resources = await collectParts(deepSeek);
    expect(resources.at(-1)).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
    expect((resources.at(-1) as { error: AppError }).error.message).toContain(
      'finish_reason "insufficient_system_resource"',
    );
  });

  it("retries an answer that gave up before producing anything", async () => {
    const gaveUp: MockHandler = (_request, response) =>
      writeEvents(response, [chunk({ role: "assistant", content: "" }), chunk({}, "error")]);
    const upstream = await startTestMock(sequence(1, gaveUp, streamText(["recovered"])));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("recovered");
    expect(upstream.requests).toHaveLength(2);
  });
});

describe("an upstream that reports more tokens than the request can have used", () => {
  /** An engine on `handler` whose log lines are kept; `contextLength` for the model. */
  async function engineWithLog(handler: MockHandler, contextLength?: number) {
    const upstream = await startTestMock(handler);
    const warnings: { fields: Record<string, unknown>; message: string | undefined }[] = [];
    const logger = {
      info: () => {},
      warn: (fields: object, message?: string) =>
        void warnings.push({ fields: fields as Record<string, unknown>, message }),
      error: () => {},
    };
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl], contextLength === undefined ? {} : { contextLength }),
      logger,
    });
    return { engine, warnings };
  }

  it("is charged at what was asked for (regression: 1e300 completion tokens for max_tokens 5 drained the account)", async () => {
    const { engine, warnings } = await engineWithLog((_request, response) =>
      writeEvents(response, textEvents(["Hi"], { usage: undefined }).concat([usageChunk(9, 1e300)])),
    );
    const usage = lastUsage(await collectParts(engine, chatRequest({ maxTokens: 5 })));
    expect(usage).toEqual({ promptTokens: 9, completionTokens: 5, estimated: true });
    expect(warnings.map((line) => line.message)).toContain(
      "the upstream reported more tokens than the request can have used; charged at the bound",
    );
  });

  it("is charged, past what the context leaves (no bound went upstream), at most the bytes of the text that came, and an end", async () => {
    // A context that leaves 2 tokens after the estimated prompt: no max_tokens is sent, and an
    // upstream that counts the prompt lower than the estimate may generate more (it was three
    // tokens a character: ASCII a lying upstream counted high was charged three times over).
    // A prompt long enough that the context holds more than the bytes' bound.
    const request = chatRequest({ messages: [{ role: "user", content: "Say hello. ".repeat(40) }] });
    const contextLength = estimatePromptTokens(request) + 2;
    const { engine } = await engineWithLog(
      (_request, response) =>
        writeEvents(
          response,
          textEvents(["日本", "語"], { usage: undefined }).concat([usageChunk(9, 1e300)]),
        ),
      contextLength,
    );
    expect(contextLength).toBeGreaterThan(9 + 16);
    const usage = lastUsage(await collectParts(engine, request));
    expect(usage).toEqual({ promptTokens: 9, completionTokens: 9 + 16, estimated: true });
  });

  it("is charged no more prompt tokens than the model's context holds", async () => {
    const { engine } = await engineWithLog(
      (_request, response) => writeEvents(response, textEvents(["Hi"], { usage: [900_000_000, 1] })),
      2048,
    );
    const usage = lastUsage(await collectParts(engine, chatRequest({ maxTokens: 5 })));
    expect(usage).toEqual({ promptTokens: 2048, completionTokens: 1, estimated: true });
  });

  it("is charged no more prompt tokens than a few times the prompt's bytes, however large the context (regression: a short prompt charged 128k)", async () => {
    const { engine } = await engineWithLog(
      (_request, response) => writeEvents(response, textEvents(["Hi"], { usage: [900_000_000, 1] })),
      128_000,
    );
    const request = chatRequest({ maxTokens: 5 });
    const prepared = await engine.prepare(request);
    const usage = lastUsage(await collectParts(engine, request));
    const bytesBound = 4 * (prepared.promptTokensAtMost ?? prepared.promptTokens) + 4096;
    expect(bytesBound).toBeLessThan(128_000);
    expect(usage).toEqual({ promptTokens: bytesBound, completionTokens: 1, estimated: true });
  });

  it("is charged no more than the max_tokens it was sent for text past it (regression: believed, past the maximum cost reserved)", async () => {
    const { engine } = await engineWithLog((_request, response) =>
      writeEvents(response, [...words((event) => event), chunk({}, "stop"), usageChunk(10, 200)]),
    );
    expect(lastUsage(await collectParts(engine, chatRequest({ maxTokens: 5 })))).toEqual({
      promptTokens: 10,
      completionTokens: 5,
      estimated: true,
    });
  });

  it("ends for its length when it counts more completion tokens than the max_tokens it was sent allows (regression: `stop`, with the charge at max_tokens)", async () => {
    const past = await engineWithLog((_request, response) =>
      writeEvents(response, [chunk({ content: "Hello world" }), chunk({}, "stop"), usageChunk(10, 3)]),
    );
    const parts = await collectParts(past.engine, chatRequest({ maxTokens: 1 }));
    expect(textOf(parts)).toBe("Hello world");
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "length",
      rawReason: "stop",
      usage: { promptTokens: 10, completionTokens: 1, estimated: true },
    });
    // Within it, or past a bound that did not go upstream (a context's), the upstream's reason stands.
    const within = await engineWithLog((_request, response) =>
      writeEvents(response, [chunk({ content: "Hello world" }), chunk({}, "stop"), usageChunk(10, 3)]),
    );
    expect((await collectParts(within.engine, chatRequest({ maxTokens: 3 }))).at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
      usage: { completionTokens: 3 },
    });
    // Reasoning it counted but did not stream explains the count: the answer itself ended.
    const reasoned = await engineWithLog((_request, response) =>
      writeEvents(response, [
        chunk({ content: "short answer" }),
        chunk({}, "stop"),
        usageWithReasoning(10, 310, 305),
      ]),
    );
    expect((await collectParts(reasoned.engine, chatRequest({ maxTokens: 10 }))).at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
      usage: { completionTokens: 10 },
    });
    // Reasoning both streamed and counted is allowed for once, not twice (regression: stop).
    const streamedAndCounted = await engineWithLog((_request, response) =>
      writeEvents(response, [
        chunk({ reasoning_content: "r".repeat(40) }),
        chunk({ content: "a".repeat(100) }),
        chunk({}, "stop"),
        usageWithReasoning(10, 55, 10),
      ]),
    );
    expect(
      (await collectParts(streamedAndCounted.engine, chatRequest({ maxTokens: 10 }))).at(-1),
    ).toMatchObject({ type: "finish", reason: "length" });
    // Streamed reasoning of 100 bytes that the upstream counts as 20 tokens, and 85 more: an
    // answer of 85 tokens for max_tokens 10 (regression: stop, charged 105 within the bytes' cap).
    const countedLess = await engineWithLog((_request, response) =>
      writeEvents(response, [
        chunk({ reasoning_content: "word ".repeat(20) }),
        chunk({ content: "a b c d e" }),
        chunk({}, "stop"),
        usageWithReasoning(10, 105, 20),
      ]),
    );
    expect((await collectParts(countedLess.engine, chatRequest({ maxTokens: 10 }))).at(-1)).toMatchObject({
      type: "finish",
      reason: "length",
      usage: { completionTokens: 30, estimated: true },
    });
    const request = chatRequest({ messages: [{ role: "user", content: "Say hello. ".repeat(40) }] });
    const unsent = await engineWithLog(
      (_request, response) =>
        writeEvents(response, [chunk({ content: "Hi" }), chunk({}, "stop"), usageChunk(9, 1e300)]),
      estimatePromptTokens(request) + 2,
    );
    expect((await collectParts(unsent.engine, request)).at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
    });
  });

  it("is charged no more than the max_tokens it was sent when it reports no usage", async () => {
    const { engine } = await engineWithLog((_request, response) =>
      writeEvents(response, [...words((event) => event), chunk({}, "stop")]),
    );
    expect(lastUsage(await collectParts(engine, chatRequest({ maxTokens: 5 })))).toMatchObject({
      completionTokens: 5,
      estimated: true,
    });
  });
});

describe("an upstream that goes on past the max_tokens it was sent", () => {
  /**
   * An engine on an upstream (no context length) that reasons `kilobytes` KB, a kilobyte a chunk,
   * then answers "Hi" and reports 10 prompt tokens and `completionTokens`.
   */
  async function reasoningThenHi(kilobytes: number, completionTokens: number): Promise<ChatEngine> {
    const reasoning = Array.from({ length: kilobytes }, () =>
      chunk({ reasoning_content: `${"r".repeat(999)} ` }),
    );
    const upstream = await startTestMock((_request, response) =>
      writeEvents(response, [
        ...reasoning,
        chunk({ content: "Hi" }),
        chunk({}, "stop"),
        usageChunk(10, completionTokens),
      ]),
    );
    return createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
  }

  it("has its answer ended there, as length, and charged at max_tokens (regression: 67 MB passed on for max_tokens 10)", async () => {
    let written = 0;
    let closed = false;
    const upstream = await startTestMock(async (_request, response) => {
      response.on("close", () => {
        closed = true;
      });
      response.writeHead(200, { "content-type": "text/event-stream" });
      // 200 characters a chunk, up to 2 MB, unless the connection goes first.
      for (; written < 10_000 && !closed; written++) {
        const event = chunk({ content: `${"x".repeat(199)} ` });
        if (!response.write(`data: ${JSON.stringify(event)}\n\n`))
          await new Promise((resolve) => setTimeout(resolve, 1));
      }
      if (!closed) response.end("data: [DONE]\n\n");
    });
    const warnings: string[] = [];
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      logger: {
        info: () => {},
        warn: (_fields: object, message?: string) => void warnings.push(message ?? ""),
        error: () => {},
      },
    });
    const parts = await collectParts(engine, chatRequest({ maxTokens: 10 }));
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "length",
      usage: { completionTokens: 10, estimated: true },
    });
    // Cut once more bytes came than 10 tokens of any vocabulary spell, at the end of the read
    // that brought them (at most what a socket read holds beyond): not 2 MB.
    expect(textOf(parts).length).toBeGreaterThan(10 * 128);
    expect(textOf(parts).length).toBeLessThan(10 * 128 + 1024 + 256 * 1024);
    expect(warnings).toContain(
      "the upstream's answer went on past the max_tokens it was sent or the model's context; it was ended there",
    );
    await expect.poll(() => closed).toBe(true);
    expect(written).toBeLessThan(10_000);
  });

  it("is not cut nor charged less for reasoning, which some upstreams generate beyond max_tokens", async () => {
    // DeepSeek's reasoner bounds only the answer after its reasoning: 2,600 tokens of reasoning
    // (13 KB), an answer of one token within max_tokens 5, counted together.
    const engine = await reasoningThenHi(13, 2601);
    const parts = await collectParts(engine, chatRequest({ maxTokens: 5 }));
    expect(textOf(parts)).toBe("Hi");
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "stop",
      usage: { promptTokens: 10, completionTokens: 2601 },
    });
  });

  it("is cut, and charged no more, past what it may hold in all: the context, reasoning included (regression: 100,016 tokens charged for a context of 1000)", async () => {
    // No max_tokens goes upstream (the catalogue gives a context); 200 KB of text, counted high.
    const flood = Array.from({ length: 1000 }, () => chunk({ content: `${"w".repeat(199)} ` }));
    const upstream = await startTestMock((_request, response) =>
      writeEvents(response, [...flood, chunk({}, "stop"), usageChunk(10, 999_999)]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { contextLength: 1000 }) });
    const parts = await collectParts(engine, chatRequest());
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "length",
      usage: { completionTokens: 1000, estimated: true },
    });
    expect(textOf(parts).length).toBeLessThan(200_000);
  });

  it("is charged no more reasoning beyond max_tokens than the allowance, where the context is not known (regression: a token a byte)", async () => {
    // 5 MB of reasoning for max_tokens 10, reported as a token a byte.
    const engine = await reasoningThenHi(5000, 5_000_001);
    const parts = await collectParts(engine, chatRequest({ maxTokens: 10 }));
    expect(parts.at(-1)).toMatchObject({
      type: "finish",
      reason: "length",
      usage: { completionTokens: 10 + REASONING_ALLOWANCE_TOKENS, estimated: true },
    });
  });

  it("is cut though its end came in the same read as the flood", async () => {
    const flood = Array.from({ length: 100 }, () => chunk({ content: `${"v".repeat(199)} ` }));
    const body = [...flood, chunk({}, "stop"), usageChunk(10, 20_000)]
      .map((event) => `data: ${JSON.stringify(event)}\n\n`)
      .join("");
    const upstream = await startTestMock((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(`${body}data: [DONE]\n\n`);
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine, chatRequest({ maxTokens: 10 }));
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "length", usage: { completionTokens: 10 } });
  });

  it("is not cut where no bound went upstream: what the context leaves is no bound it was sent", async () => {
    const upstream = await startTestMock((_request, response) =>
      writeEvents(
        response,
        textEvents(
          Array.from({ length: 40 }, () => "y".repeat(100)),
          { usage: [10, 40] },
        ),
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { contextLength: 100_000 }) });
    const parts = await collectParts(engine, chatRequest());
    expect(textOf(parts)).toBe("y".repeat(4000));
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { completionTokens: 40 } });
  });
});

import { once } from "node:events";
import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine, StreamPart } from "../../../src/engine/engine.ts";
import { MAX_ANSWER_LENGTH } from "../../../src/engine/openai/read-upstream-body.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { findFreePort } from "../../support/free-port.ts";
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
  answerError,
  answerJson,
  chatCompletion,
  chunk,
  resetAfter,
  sequence,
  streamText,
  writeEvents,
} from "./mock-upstream.ts";

const mock = startTestMock;

afterEach(closeEnginesAndMocks);

/**
 * Writes `piece` over and over until the client goes or `max` pieces are written (the end
 * follows); resolves with the pieces written.
 */
async function writeUntilClosed(response: ServerResponse, piece: string, max: number): Promise<number> {
  const closed = once(response, "close");
  let written = 0;
  while (written < max && !response.destroyed) {
    written++;
    if (!response.write(piece)) await Promise.race([once(response, "drain"), closed]);
  }
  response.end();
  return written;
}

/** The last part, checked to be an upstream_unavailable error part whose message has `text`. */
function expectErrorPart(parts: readonly StreamPart[], text: string) {
  const last = parts.at(-1);
  expect(last).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
  if (last?.type !== "error") throw new Error("no error part");
  expect(last.error.message).toContain(text);
  return last;
}

function expectNoSecrets(error: unknown, ...secrets: string[]) {
  expect(error).toBeInstanceOf(AppError);
  for (const secret of secrets) expect((error as AppError).message).not.toContain(secret);
}

describe("upstream engine: retries", () => {
  it("waits out a 429's retry-after, then succeeds", async () => {
    const upstream = await mock(
      sequence(
        1,
        answerError(429, { error: { message: "slow down" } }, { "retry-after": "1" }),
        streamText(["ok"]),
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const started = performance.now();
    const parts = await collectParts(engine);
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(textOf(parts)).toBe("ok");
    expect(upstream.requests).toHaveLength(2);
  });

  it("gives up on a retry-after longer than it may wait, telling the client when to retry", async () => {
    const upstream = await mock(answerError(429, {}, { "retry-after": "30" }));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503, retryAfterSeconds: 30 });
    expect(upstream.requests).toHaveLength(1);
  });

  it("retries a 500 with backoff, then succeeds", async () => {
    const upstream = await mock(sequence(2, answerError(500), streamText(["fine"])));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("fine");
    expect(upstream.requests).toHaveLength(3);
  });

  it("throws 503 upstream_unavailable once the retries are spent, naming no secret", async () => {
    const upstream = await mock(answerError(502));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 2 },
    });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503 });
    expect((error as AppError).message).toBe(
      "The upstream server of the model 'remote' answered HTTP 502. Please retry later.",
    );
    expectNoSecrets(error, "127.0.0.1", "sk-upstream");
    expect(upstream.requests).toHaveLength(3);
  });

  it("moves to another endpoint at once when one refuses connections", async () => {
    const closedPort = await findFreePort();
    const healthy = await mock(streamText(["from the healthy one"]));
    const engine = createTestEngine({
      model: upstreamModel([`http://127.0.0.1:${closedPort}/v1`, healthy.baseUrl]),
    });
    for (let index = 0; index < 3; index++) {
      expect(textOf(await collectParts(engine))).toBe("from the healthy one");
    }
    expect(healthy.requests).toHaveLength(3);
  });

  it("reports a refused connection when no endpoint can be reached", async () => {
    const closedPort = await findFreePort();
    const engine = createTestEngine({ model: upstreamModel([`http://127.0.0.1:${closedPort}/v1`]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable" });
    expect((error as AppError).message).toContain("refused the connection");
    expectNoSecrets(error, String(closedPort));
  });

  it("names an answer that is not HTTP and tries that endpoint no more (regression: 'could not be reached', retried)", async () => {
    const broken = await mock((_request, response) => {
      response.socket?.end("HELLO THERE\r\n\r\n");
    });
    const healthy = await mock(streamText(["from the healthy one"]));
    const engine = createTestEngine({ model: upstreamModel([broken.baseUrl]), settings: { maxRetries: 2 } });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable" });
    expect((error as AppError).message).toContain("sent a response that is not valid HTTP");
    expect(broken.requests).toHaveLength(1);

    // With another endpoint, the request goes there.
    const both = createTestEngine({ model: upstreamModel([broken.baseUrl, healthy.baseUrl]) });
    expect(textOf(await collectParts(both))).toBe("from the healthy one");
  });

  it("retries a stream that closed before sending anything", async () => {
    const upstream = await mock(
      sequence(
        1,
        (_request, response) => {
          response.writeHead(200, { "content-type": "text/event-stream" });
          response.end();
        },
        streamText(["second time"]),
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("second time");
  });
});

describe("upstream engine: errors the client must not see as its own", () => {
  it.each([401, 403])("turns an upstream %i into 503 without retrying the same endpoint", async (status) => {
    const upstream = await mock(
      answerError(status, { error: { message: "Incorrect API key provided: sk-upstream-secret-123456" } }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503 });
    expect((error as AppError).message).toContain("refused Tollgate's credentials");
    expectNoSecrets(error, "sk-upstream", "Incorrect API key");
    expect(upstream.requests).toHaveLength(1);
  });

  it("passes an upstream 400 on with its message, without retry or fallback", async () => {
    const upstream = await mock(
      answerError(400, {
        error: { message: "Unsupported value: 'seed'.", param: "seed", code: "unsupported_value" },
      }),
    );
    const fallbackUpstream = await mock(streamText(["fallback"]));
    const fallback = createTestEngine({ model: upstreamModel([fallbackUpstream.baseUrl], { id: "backup" }) });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? fallback : undefined),
    });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "invalid_value", status: 400, param: "seed" });
    expect((error as AppError).message).toContain("Unsupported value: 'seed'.");
    expect(upstream.requests).toHaveLength(1);
    expect(fallbackUpstream.requests).toHaveLength(0);
  });
});

describe("upstream engine: fallbacks and cooldown", () => {
  it("runs the request on a fallback model once every endpoint failed", async () => {
    const failing = await mock(answerError(500));
    const backupUpstream = await mock(streamText(["from the backup"], { usage: [30, 3] }));
    const backup = createTestEngine({
      model: upstreamModel([backupUpstream.baseUrl], { id: "backup", upstreamModel: "backup-model" }),
    });
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl], { fallbacks: ["missing", "backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
    });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("from the backup");
    expect(parts.at(-1)).toMatchObject({ type: "finish", usage: { promptTokens: 30, completionTokens: 3 } });
    expect(failing.requests).toHaveLength(3);
    expect(backupUpstream.requests[0]?.body.model).toBe("backup-model");
  });

  it("ends a run its consumer stops at its last batch, primary or fallback (regression: counted as running for good)", async () => {
    /** Runs one request and stops at its first batch, which holds the whole answer, as the chat service does. */
    const stopAtFirstBatch = async (engine: ChatEngine) => {
      const prepared = await engine.prepare(chatRequest());
      const run = prepared.run(new AbortController().signal)[Symbol.asyncIterator]();
      const first = await run.next();
      expect(first.done === true ? undefined : first.value.at(-1)).toMatchObject({ type: "finish" });
      await run.return?.(undefined);
    };
    const whole = answerJson(chatCompletion({ role: "assistant", content: "whole" }, { usage: [5, 1] }));
    const backupUpstream = await mock(whole);
    const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
    const primaryUpstream = await mock(whole);
    const engine = createTestEngine({
      model: upstreamModel([primaryUpstream.baseUrl], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      settings: { maxRetries: 0 },
    });
    await stopAtFirstBatch(engine);
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });

    primaryUpstream.handle(answerError(500));
    await stopAtFirstBatch(engine);
    expect(backupUpstream.requests).toHaveLength(1);
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
    expect(backup.load?.()).toEqual({ running: 0, waiting: 0 });
  });

  it("names its fallbacks and, once one starts, the fallback that served", async () => {
    const failing = await mock(answerError(500));
    const backupUpstream = await mock(streamText(["from the backup"]));
    const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      settings: { maxRetries: 0 },
    });
    const prepared = await engine.prepare(chatRequest());
    expect(prepared.alternateModelIds).toEqual(["backup"]);
    const run = prepared.run(new AbortController().signal)[Symbol.asyncIterator]();
    expect(prepared.servedBy?.()).toBeUndefined();
    await run.next();
    expect(prepared.servedBy?.()).toBe("backup");
    while ((await run.next()).done !== true) {}
  });

  it("holds a fallback to the completion bound the reservation was priced at (regression)", async () => {
    const failing = await mock(answerError(500));
    const backupUpstream = await mock(streamText(["from the backup"]));
    // Without a context length the backup alone would send its default bound, 4096.
    const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl], { fallbacks: ["backup"], contextLength: 1000 }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      settings: { maxRetries: 0 },
    });
    const prepared = await engine.prepare(chatRequest());
    expect(prepared.maxCompletionTokens).toBeLessThan(1000);
    for await (const _part of prepared.run(new AbortController().signal));
    expect(backupUpstream.requests[0]?.body.max_tokens).toBe(prepared.maxCompletionTokens);
  });

  it("does not chain or loop through the fallbacks' own fallbacks", async () => {
    const first = await mock(answerError(503));
    const second = await mock(answerError(503));
    const engines = new Map<string, ChatEngine>();
    const resolveEngine = (id: string) => engines.get(id);
    engines.set(
      "a",
      createTestEngine({
        model: upstreamModel([first.baseUrl], { id: "a", fallbacks: ["b"] }),
        resolveEngine,
      }),
    );
    engines.set(
      "b",
      createTestEngine({
        model: upstreamModel([second.baseUrl], { id: "b", fallbacks: ["a"] }),
        resolveEngine,
      }),
    );
    const error = await firstError(engines.get("a")!);
    expect(error).toMatchObject({ code: "upstream_unavailable" });
    expect((error as AppError).message).toContain("'a'");
    expect(first.requests).toHaveLength(3);
    expect(second.requests).toHaveLength(3);
  });

  it("goes to a fallback at once while every endpoint rests, instead of waiting for them (regression)", async () => {
    const failing = await mock(answerError(500));
    const backupUpstream = await mock(streamText(["from the backup"]));
    const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      // One failure rests the endpoint, for longer than a test may wait but within what a
      // request would wait for it.
      settings: { failureThreshold: 1, cooldownMs: 20_000, maxRetryWaitMs: 60_000 },
    });
    for (let index = 0; index < 3; index++) {
      expect(textOf(await collectParts(engine))).toBe("from the backup");
    }
    expect(failing.requests).toHaveLength(1);
    expect(backupUpstream.requests).toHaveLength(3);
  });

  it("waits for resting endpoints when no fallback could serve", async () => {
    const failing = await mock(sequence(1, answerError(500), streamText(["after the rest"])));
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl], { fallbacks: ["missing"] }),
      resolveEngine: () => undefined,
      settings: { failureThreshold: 1, cooldownMs: 50 },
    });
    expect(textOf(await collectParts(engine))).toBe("after the rest");
    expect(failing.requests).toHaveLength(2);
  });

  it("bounds the time a request waits for endpoints in all, not pause by pause (regression)", async () => {
    const failing = await mock(answerError(500));
    // Rests of 100, 200, 400 ms: each of the first two fits the bound, the two together do not.
    const engine = createTestEngine({
      model: upstreamModel([failing.baseUrl]),
      settings: { failureThreshold: 1, cooldownMs: 100, maxRetryWaitMs: 250, maxRetries: 5 },
    });
    expect(await firstError(engine)).toMatchObject({ code: "upstream_unavailable" });
    expect(failing.requests).toHaveLength(2);
  });

  it("rests an endpoint that keeps failing: unavailable, failing fast, back after its cooldown", async () => {
    const upstream = await mock(answerError(500));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      // A cooldown long enough that a loaded machine cannot outrun it between the checks below.
      settings: { maxRetries: 0, failureThreshold: 2, cooldownMs: 1000 },
    });
    await firstError(engine);
    expect(engine.status()).toBe("available");
    await firstError(engine);
    expect(engine.status()).toBe("unavailable");
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", retryAfterSeconds: 1 });
    expect(upstream.requests).toHaveLength(2);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(engine.status()).toBe("available");
    upstream.handle(streamText(["recovered"]));
    expect(textOf(await collectParts(engine))).toBe("recovered");
  });
});

describe("upstream engine: failures after the first part", () => {
  it("ends a stream cut mid-way with an error part and estimated usage", async () => {
    const upstream = await mock(
      resetAfter([
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "Once upon" }),
        chunk({ content: " a time" }),
      ]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Once upon a time");
    const last = expectErrorPart(parts, "the answer is incomplete");
    expect(last.usage).toMatchObject({ estimated: true });
    expect(last.usage.completionTokens).toBeGreaterThanOrEqual(3);
    expect(upstream.requests).toHaveLength(1);
  });

  it("cuts an upstream whose event never ends, instead of reading it into memory", async () => {
    const limitMiB = MAX_ANSWER_LENGTH / (1024 * 1024);
    let writtenMiB: Promise<number> | undefined;
    const upstream = await mock(async (_request, response) => {
      await writeEvents(response, [chunk({ content: "Partial" })], { done: false, end: false });
      // One `data:` line that never ends, a MiB at a time.
      response.write("data: ");
      writtenMiB = writeUntilClosed(response, "x".repeat(1024 * 1024), 2 * limitMiB);
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Partial");
    expectErrorPart(parts, `an event longer than ${limitMiB} MiB`);
    // The connection was dropped soon after the limit: the upstream could not write it all.
    expect(await writtenMiB).toBeLessThan(2 * limitMiB);
  });

  it("cuts an upstream whose streamed answer never ends", async () => {
    const limitMiB = MAX_ANSWER_LENGTH / (1024 * 1024);
    let writtenMiB: Promise<number> | undefined;
    const upstream = await mock((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      const event = `data: ${JSON.stringify(chunk({ content: "x".repeat(1024 * 1024) }))}\n\n`;
      writtenMiB = writeUntilClosed(response, event, 2 * limitMiB);
    });
    // A context that bounds nothing: no max_tokens goes upstream, whose answer is ended past it.
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl], { contextLength: 1_000_000_000 }),
    });
    const parts = await collectParts(engine);
    expect(textOf(parts).length).toBeGreaterThan(MAX_ANSWER_LENGTH);
    expect(expectErrorPart(parts, `an answer longer than ${limitMiB} MiB`).usage).toMatchObject({
      estimated: true,
    });
    expect(await writtenMiB).toBeLessThan(2 * limitMiB);
  });

  it("ends with an error part when the upstream sends an error event after content", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [
        chunk({ content: "Partial" }),
        { error: { message: "model crashed", type: "server_error" } },
      ]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(parts[0]).toEqual({ type: "text-delta", text: "Partial" });
    expect(parts[1]).toMatchObject({ type: "error", usage: { estimated: true } });
    if (parts[1]?.type !== "error") throw new Error("no error part");
    expect(parts[1].error.message).toContain("model crashed");
  });
});

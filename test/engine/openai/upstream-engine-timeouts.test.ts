import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import type { AppError } from "../../../src/errors/app-error.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { chunk, type MockHandler, streamText, textEvents, writeEvents } from "./mock-upstream.ts";

const mock = startTestMock;

afterEach(closeEnginesAndMocks);

/** Never answers; the request stays open until the client gives up. */
const silent: MockHandler = () => {};

/** A long answer, one chunk every `delayMs`. */
function slowStream(delayMs: number, count = 200): MockHandler {
  return (_request, response) =>
    writeEvents(response, textEvents(Array.from({ length: count }, () => " word")), { delayMs });
}

describe("upstream engine: timeouts", () => {
  it("gives up on an upstream that sends no first byte after one timeout, not one per retry (regression: 3 timeouts)", async () => {
    const upstream = await mock(silent);
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { firstByteTimeoutMs: 150, maxRetries: 2 },
    });
    const started = performance.now();
    const error = await firstError(engine);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(error).toMatchObject({ code: "upstream_unavailable" });
    expect((error as AppError).message).toContain("did not answer within 150 ms");
    expect(upstream.requests).toHaveLength(1);
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("tries another endpoint after one that sent no first byte", async () => {
    const stalled = await mock(silent);
    const answering = await mock(streamText(["ok"]));
    const engine = createTestEngine({
      model: upstreamModel([stalled.baseUrl, answering.baseUrl]),
      settings: { firstByteTimeoutMs: 150, maxRetries: 2 },
    });
    // Whichever the balancer picks first, the answer comes, and the stalled one was asked once at most.
    expect((await collectParts(engine)).at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect(stalled.requests.length).toBeLessThanOrEqual(1);
    expect(answering.requests).toHaveLength(1);
  });

  it("counts the first byte of the body, not the headers", async () => {
    const upstream = await mock((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.flushHeaders();
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { firstByteTimeoutMs: 150, idleTimeoutMs: 10_000, maxRetries: 0 },
    });
    const error = await firstError(engine);
    expect((error as AppError).message).toContain("did not answer within 150 ms");
  });

  it("counts an error body that never ends as an answer, cut by the idle timeout (regression: 'did not answer')", async () => {
    const upstream = await mock((_request, response) => {
      // The status and the start of the body in one write, then nothing, and no end.
      response.writeHead(500, { "content-type": "application/json" });
      response.write('{"error":{"message":"overloaded"');
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { firstByteTimeoutMs: 5_000, idleTimeoutMs: 200, maxRetries: 0 },
    });
    const error = (await firstError(engine)) as AppError;
    // The idle timeout cut it: the first-byte timeout would say "did not answer within 5000 ms".
    expect(error.message).toContain("sent no answer data for 200 ms");
  });

  it("counts comments alone as silence, before the first event and after one (regression: waited for ever)", async () => {
    /** Sends `first` events, then a comment every 30 ms until the connection goes. */
    const pinging =
      (first: readonly unknown[]): MockHandler =>
      async (_request, response) => {
        await writeEvents(response, first, { done: false, end: false });
        const timer = setInterval(() => response.write(": PROCESSING\n\n"), 30);
        response.on("close", () => clearInterval(timer));
      };
    const queued = await mock(pinging([]));
    const engine = createTestEngine({
      model: upstreamModel([queued.baseUrl]),
      settings: { firstByteTimeoutMs: 150, idleTimeoutMs: 150, maxRetries: 0 },
    });
    expect(((await firstError(engine)) as AppError).message).toContain("did not answer within 150 ms");

    const stuck = await mock(pinging([chunk({ content: "Start" })]));
    const after = createTestEngine({
      model: upstreamModel([stuck.baseUrl]),
      settings: { firstByteTimeoutMs: 150, idleTimeoutMs: 150, maxRetries: 0 },
    });
    const parts = await collectParts(after);
    expect(parts.at(-1)).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
    expect((parts.at(-1) as { error: AppError }).error.message).toContain("sent no answer data for 150 ms");
  });

  it("counts chunks that carry nothing, and an event dripping in a byte at a time, as silence (regression: waited as long as they went on)", async () => {
    /** Sends `first` events, then `beat` every 30 ms until the connection goes. */
    const beating =
      (first: readonly unknown[], beat: string): MockHandler =>
      async (_request, response) => {
        await writeEvents(response, first, { done: false, end: false });
        const timer = setInterval(() => response.write(beat), 30);
        response.on("close", () => clearInterval(timer));
      };
    const settings = { firstByteTimeoutMs: 150, idleTimeoutMs: 150, maxRetries: 0 };
    const empty = `data: ${JSON.stringify({ ...chunk({}), choices: [] })}\n\n`;
    const emptyDelta = `data: ${JSON.stringify(chunk({}))}\n\n`;
    for (const beat of [empty, emptyDelta]) {
      const queued = await mock(beating([], beat));
      const engine = createTestEngine({ model: upstreamModel([queued.baseUrl]), settings });
      expect(((await firstError(engine)) as AppError).message).toContain("did not answer within 150 ms");
      const stuck = await mock(beating([chunk({ content: "Start" })], beat));
      const after = createTestEngine({ model: upstreamModel([stuck.baseUrl]), settings });
      const parts = await collectParts(after);
      expect((parts.at(-1) as { error: AppError }).error.message).toContain("sent no answer data for 150 ms");
    }
    // An event whose text comes a byte at a time, never ending.
    const dripping = await mock(async (_request, response) => {
      await writeEvents(response, [chunk({ content: "Start" })], { done: false, end: false });
      response.write('data: {"choices":[{"index":0,"delta":{"content":"');
      const timer = setInterval(() => response.write("a"), 30);
      response.on("close", () => clearInterval(timer));
    });
    const parts = await collectParts(
      createTestEngine({ model: upstreamModel([dripping.baseUrl]), settings }),
    );
    expect((parts.at(-1) as { error: AppError }).error.message).toContain("sent no answer data for 150 ms");
  });

  it("does not count the wait for one of max_connections as the upstream's silence (regression)", async () => {
    // Each answer takes 150 ms; four at once through one connection wait up to 450 ms for it.
    const upstream = await mock(async (_request, response) => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      await writeEvents(response, textEvents(["ok"]));
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { firstByteTimeoutMs: 300, maxConnections: 1, maxRetries: 0 },
    });
    const ends = await Promise.all(
      Array.from({ length: 4 }, async () => (await collectParts(engine)).at(-1)),
    );
    for (const end of ends) expect(end).toMatchObject({ type: "finish", reason: "stop" });
    expect(upstream.requests).toHaveLength(4);
    expect(engine.status()).toBe("available");
  });

  it("ends a stream that falls silent with an error part", async () => {
    const upstream = await mock(async (_request, response) => {
      await writeEvents(response, [chunk({ content: "Start" })], { done: false, end: false });
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { idleTimeoutMs: 150 },
    });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) parts.push(part);
    expect(parts[0]).toEqual({ type: "text-delta", text: "Start" });
    expect(parts[1]).toMatchObject({
      type: "error",
      error: { code: "upstream_unavailable" },
      usage: { estimated: true },
    });
    if (parts[1]?.type !== "error") throw new Error("no error part");
    expect(parts[1].error.message).toContain("sent no answer data for 150 ms");
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("does not count the time its own reader is busy (a slow client) as the upstream's silence", async () => {
    // 100 chunks 2 ms apart: the engine holds at most 32 pieces unread, then stops reading the
    // upstream, which therefore goes quiet while the reader is away for longer than the timeout.
    const upstream = await mock(slowStream(2, 100));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { idleTimeoutMs: 150 },
    });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) {
        if (parts.length === 0) await new Promise((resolve) => setTimeout(resolve, 600));
        parts.push(part);
      }
    expect(parts.filter((part) => part.type === "text-delta")).toHaveLength(100);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { completionTokens: 100 } });
    expect(engine.status()).toBe("available");
  });

  it("ends the answer soon after the finish reason when the upstream then holds the stream open", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, textEvents(["Hi"], { usage: undefined }), { done: false, end: false }),
    );
    // Without the grace after the finish reason, the minute of idle timeout would be waited for.
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { idleTimeoutMs: 60_000 },
    });
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { estimated: true } });
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("gives up on a connection that is never established (TLS handshake unanswered)", async () => {
    const sockets: Socket[] = [];
    const server: Server = createServer((socket) => {
      sockets.push(socket);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const port = (server.address() as { port: number }).port;
    try {
      // The other timeouts are far longer: only the connect timeout can end this attempt.
      const engine = createTestEngine({
        model: upstreamModel([`https://127.0.0.1:${port}/v1`]),
        settings: { connectTimeoutMs: 150, firstByteTimeoutMs: 60_000, idleTimeoutMs: 60_000, maxRetries: 0 },
      });
      const started = performance.now();
      const error = await firstError(engine);
      // Not before its time (a few ms of slack: timers run on the event loop's coarser clock).
      expect(performance.now() - started).toBeGreaterThanOrEqual(140);
      expect(error).toMatchObject({ code: "upstream_unavailable" });
      expect((error as AppError).message).toContain("did not accept a connection in time");
    } finally {
      for (const socket of sockets) socket.destroy();
      server.close();
    }
  });
});

describe("upstream engine: client abort", () => {
  it("aborts the upstream request and finishes with the usage so far, estimated", async () => {
    const upstream = await mock(slowStream(20));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    const controller = new AbortController();
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(controller.signal))
      for (const part of batch) {
        parts.push(part);
        if (parts.length === 5) controller.abort();
      }
    const last = parts.at(-1);
    expect(last).toMatchObject({
      type: "finish",
      reason: "stop",
      rawReason: "abort",
      usage: { estimated: true },
    });
    if (last?.type !== "finish") throw new Error("no finish");
    expect(last.usage.promptTokens).toBe(prepared.promptTokens);
    expect(last.usage.completionTokens).toBeGreaterThanOrEqual(5);
    expect(last.usage.completionTokens).toBeLessThan(20);
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("keeps the upstream's finish reason when the client left after it, before the usage (regression: recorded as stopped)", async () => {
    // The whole answer and its finish reason, then the connection held open: no usage, no [DONE].
    const upstream = await mock((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      for (const event of textEvents(["one", " two"], { finishReason: "length", usage: undefined }))
        response.write(`data: ${JSON.stringify(event)}\n\n`);
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    const controller = new AbortController();
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(controller.signal))
      for (const part of batch) {
        parts.push(part);
        // Gone a moment later, the finish reason read, within the second the usage is waited for.
        if (part.type === "text-delta" && part.text === " two") setTimeout(() => controller.abort(), 100);
      }
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "length", rawReason: "length" });
  });

  it("finishes with no completion tokens when aborted before the first byte", async () => {
    const controller = new AbortController();
    // The client leaves once the upstream has the request, which it never answers.
    const upstream = await mock(() => controller.abort());
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(controller.signal)) for (const part of batch) parts.push(part);
    expect(parts).toEqual([
      {
        type: "finish",
        reason: "stop",
        rawReason: "abort",
        usage: { promptTokens: prepared.promptTokens, completionTokens: 0, estimated: true },
      },
    ]);
    expect(await upstream.requests[0]?.closedEarly).toBe(true);
  });

  it("stops waiting between retries when the client leaves", async () => {
    // Retry after an hour: a run that waited it out would never end within the test's time.
    const upstream = await mock((_request, response) => {
      response.writeHead(503, { "retry-after": "3600" });
      response.end();
    });
    const controller = new AbortController();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetryWaitMs: 2 * 3_600_000 },
      // The run begins its pause as soon as it has logged the failed attempt: the client leaves
      // during the pause.
      logger: {
        info: () => {},
        warn: (_fields, message) => {
          if (message === "upstream attempt failed") setImmediate(() => controller.abort());
        },
        error: () => {},
      },
    });
    const prepared = await engine.prepare(chatRequest());
    const parts: StreamPart[] = [];
    for await (const batch of prepared.run(controller.signal)) for (const part of batch) parts.push(part);
    expect(controller.signal.aborted).toBe(true);
    expect(parts).toEqual([expect.objectContaining({ type: "finish", rawReason: "abort" })]);
    expect(upstream.requests).toHaveLength(1);
  });
});

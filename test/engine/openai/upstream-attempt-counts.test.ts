/**
 * The upstream engine counts every HTTP attempt at its endpoints by outcome, and every fallback a
 * request went on to (ChatEngine.upstreamActivity, read by `/metrics`): a request served after a
 * retry on another endpoint, or by a fallback, looked like a plain success everywhere but the logs.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine, UpstreamActivity } from "../../../src/engine/engine.ts";
import { UpstreamCounts } from "../../../src/engine/openai/upstream-counts.ts";
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
import { answerAs, answerError, sequence, streamText, textEvents, writeEvents } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** The non-zero attempt counts, as `endpoint outcome` → count. */
function attempts(engine: ChatEngine): Record<string, number> {
  return nonZero(engine.upstreamActivity?.().attempts ?? [], (each) => `${each.endpoint} ${each.outcome}`);
}

/** The non-zero fallback counts, as `fallback outcome` → count. */
function fallbacks(engine: ChatEngine): Record<string, number> {
  return nonZero(engine.upstreamActivity?.().fallbacks ?? [], (each) => `${each.fallback} ${each.outcome}`);
}

function nonZero<Entry extends { count: number }>(
  entries: readonly Entry[],
  keyOf: (entry: Entry) => string,
): Record<string, number> {
  return Object.fromEntries(
    entries.filter((each) => each.count > 0).map((each) => [keyOf(each), each.count]),
  );
}

describe("upstream attempt counts", () => {
  it("lists every endpoint with every outcome at 0 before any request, and counts a success as ok", async () => {
    const upstream = await startTestMock(streamText(["Hi"]));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const activity = engine.upstreamActivity?.() as UpstreamActivity;
    expect(activity.attempts.map((each) => [each.endpoint, each.outcome, each.count])).toEqual(
      ["ok", "http_error", "stream_error", "transport_error", "timeout", "cancelled"].map((outcome) => [
        upstream.baseUrl,
        outcome,
        0,
      ]),
    );
    expect(activity.fallbacks).toEqual([]);
    expect(textOf(await collectParts(engine))).toBe("Hi");
    expect(textOf(await collectParts(engine))).toBe("Hi");
    expect(attempts(engine)).toEqual({ [`${upstream.baseUrl} ok`]: 2 });
  });

  it("counts a 500 on one endpoint and the success on the next, each under its endpoint", async () => {
    const failing = await startTestMock(answerError(500));
    const healthy = await startTestMock(streamText(["from the healthy one"]));
    const engine = createTestEngine({ model: upstreamModel([failing.baseUrl, healthy.baseUrl]) });
    // The balancer may begin with either: the first request that reaches the failing one retries.
    while (failing.requests.length === 0) await collectParts(engine);
    expect(attempts(engine)).toEqual({
      [`${failing.baseUrl} http_error`]: 1,
      [`${healthy.baseUrl} ok`]: healthy.requests.length,
    });
  });

  it("counts a refused connection as transport_error (the key and query never in the name)", async () => {
    const closedPort = await findFreePort();
    const engine = createTestEngine({
      model: upstreamModel([`http://127.0.0.1:${closedPort}/v1?api-version=2024-secret-value`]),
      settings: { maxRetries: 1 },
    });
    await firstError(engine);
    expect(attempts(engine)).toEqual({ [`http://127.0.0.1:${closedPort}/v1 transport_error`]: 2 });
    expect(JSON.stringify(engine.upstreamActivity?.())).not.toMatch(/secret/);
  });

  it("counts no first byte in time as timeout, and a 2xx that is no answer as stream_error", async () => {
    const silent = await startTestMock(() => new Promise(() => {}));
    const engine = createTestEngine({
      model: upstreamModel([silent.baseUrl]),
      settings: { firstByteTimeoutMs: 100, maxRetries: 0 },
    });
    await firstError(engine);
    expect(attempts(engine)).toEqual({ [`${silent.baseUrl} timeout`]: 1 });

    const garbled = await startTestMock(answerAs("text/event-stream", "data: not json\n\n"));
    const other = createTestEngine({ model: upstreamModel([garbled.baseUrl]), settings: { maxRetries: 0 } });
    await firstError(other);
    expect(attempts(other)).toEqual({ [`${garbled.baseUrl} stream_error`]: 1 });
  });

  it("counts an answer the client left in the middle of as cancelled", async () => {
    const slow = await startTestMock((_request, response) =>
      writeEvents(response, textEvents(["a", "b", "c", "d", "e"]), { delayMs: 100 }),
    );
    const engine = createTestEngine({ model: upstreamModel([slow.baseUrl]) });
    const controller = new AbortController();
    const prepared = await engine.prepare(chatRequest());
    for await (const _batch of prepared.run(controller.signal)) controller.abort();
    expect(attempts(engine)).toEqual({ [`${slow.baseUrl} cancelled`]: 1 });
  });

  it("names two endpoints on one URL apart, by their place in the list", async () => {
    const upstream = await startTestMock(streamText(["Hi"]));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl, upstream.baseUrl]) });
    expect(new Set(engine.upstreamActivity?.().attempts.map((each) => each.endpoint))).toEqual(
      new Set([`${upstream.baseUrl}#1`, `${upstream.baseUrl}#2`]),
    );
  });

  it("lists a fallback named twice once", async () => {
    const upstream = await startTestMock(streamText(["Hi"]));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl], { fallbacks: ["backup", "backup"] }),
    });
    expect(engine.upstreamActivity?.().fallbacks.map((each) => `${each.fallback} ${each.outcome}`)).toEqual([
      "backup served",
      "backup failed",
      "backup skipped",
    ]);
  });

  it("counts the fallback that served a request, one that failed and one that was not there", async () => {
    const down = await startTestMock(answerError(503));
    const backupUpstream = await startTestMock(sequence(1, answerError(500), streamText(["from backup"])));
    const backup = createTestEngine({
      model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }),
      settings: { maxRetries: 0 },
    });
    const engine = createTestEngine({
      model: upstreamModel([down.baseUrl], { fallbacks: ["gone", "backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      settings: { maxRetries: 0 },
    });
    await firstError(engine);
    expect(textOf(await collectParts(engine))).toBe("from backup");
    expect(fallbacks(engine)).toEqual({ "gone skipped": 2, "backup failed": 1, "backup served": 1 });
    expect(engine.upstreamActivity?.().fallbacks).toHaveLength(6);
    // The fallback's attempts count under the fallback model, its endpoints its own.
    expect(attempts(backup)).toEqual({
      [`${backupUpstream.baseUrl} http_error`]: 1,
      [`${backupUpstream.baseUrl} ok`]: 1,
    });
    expect(attempts(engine)).toEqual({ [`${down.baseUrl} http_error`]: 2 });
  });

  it("goes on counting in the engine that replaces one for the same model", async () => {
    const upstream = await startTestMock(streamText(["Hi"]));
    const context = { resolveEngine: () => undefined };
    const model = upstreamModel([upstream.baseUrl]);
    const first = createTestEngine({ model, counts: UpstreamCounts.of(context, model.id) });
    await collectParts(first);
    const second = createTestEngine({ model, counts: UpstreamCounts.of(context, model.id) });
    await collectParts(second);
    expect(attempts(second)).toEqual({ [`${upstream.baseUrl} ok`]: 2 });
    // Another catalogue (another server in the same process) counts apart.
    const elsewhere = createTestEngine({
      model,
      counts: UpstreamCounts.of({ resolveEngine: () => undefined }, model.id),
    });
    expect(attempts(elsewhere)).toEqual({});
  });
});

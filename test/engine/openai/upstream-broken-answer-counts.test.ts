/**
 * An upstream that closes or resets the connection once its answer's status came broke the answer,
 * not the way to it: `/metrics` counts a 2xx cut so as `stream_error` (as a stream that ends too
 * soon), a cut error answer as `http_error`, and keeps `transport_error` for connections that
 * failed before any status (a cut 200 was counted as `transport_error`).
 */
import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import {
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { type MockHandler, textEvents, writeEvents } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** The non-zero attempt counts of the engine's one endpoint, by outcome. */
function attemptCounts(engine: ChatEngine): Record<string, number> {
  const attempts = engine.upstreamActivity?.().attempts ?? [];
  return Object.fromEntries(
    attempts.filter((each) => each.count > 0).map((each) => [each.outcome, each.count]),
  );
}

/** Closes the connection of `response` soon after what was written went out (`reset`: a TCP RST). */
function cutSoon(response: ServerResponse, reset: boolean): void {
  setTimeout(() => {
    if (reset) response.socket?.resetAndDestroy();
    else response.socket?.destroy();
  }, 20);
}

/** Answers with `status` and its headers only, then cuts the connection. */
function statusThenCut(status: number, reset: boolean): MockHandler {
  return (_request, response) => {
    const contentType = status === 200 ? "text/event-stream" : "application/json";
    response.writeHead(status, { "content-type": contentType, "content-length": "1000" });
    response.write(status === 200 ? ": waiting\n\n" : '{"error": {"message": "overl');
    cutSoon(response, reset);
  };
}

describe("upstream attempt counts: connections broken after the status", () => {
  for (const reset of [false, true]) {
    const how = reset ? "reset (RST)" : "closed (FIN)";

    it(`counts a 200 stream ${how} mid-answer as stream_error`, async () => {
      const upstream = await startTestMock(async (_request, response) => {
        await writeEvents(response, textEvents(["Hel"]).slice(0, 2), { done: false, end: false });
        cutSoon(response, reset);
      });
      const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
      const parts = await collectParts(engine);
      expect(textOf(parts)).toBe("Hel");
      expect(parts.at(-1)).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
      expect(attemptCounts(engine)).toEqual({ stream_error: 1 });
    });

    it(`counts a 200 ${how} before any event as stream_error`, async () => {
      const upstream = await startTestMock(statusThenCut(200, reset));
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl]),
        settings: { maxRetries: 0 },
      });
      expect(await firstError(engine)).toMatchObject({ code: "upstream_unavailable" });
      expect(attemptCounts(engine)).toEqual({ stream_error: 1 });
    });

    it(`counts an error answer ${how} in its body as http_error`, async () => {
      const upstream = await startTestMock(statusThenCut(500, reset));
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl]),
        settings: { maxRetries: 0 },
      });
      expect(await firstError(engine)).toMatchObject({ code: "upstream_unavailable" });
      expect(attemptCounts(engine)).toEqual({ http_error: 1 });
    });
  }

  it("still counts a stream that ends cleanly without its finish as stream_error", async () => {
    const upstream = await startTestMock(async (_request, response) => {
      await writeEvents(response, textEvents(["Hel"]).slice(0, 2), { done: false });
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("Hel");
    expect(attemptCounts(engine)).toEqual({ stream_error: 1 });
  });

  it("still counts a 200 stream that stalls as timeout", async () => {
    const upstream = await startTestMock((_request, response) =>
      writeEvents(response, textEvents(["Hel"]).slice(0, 2), { done: false, end: false }),
    );
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { idleTimeoutMs: 100 },
    });
    const parts = await collectParts(engine);
    expect(parts.at(-1)).toMatchObject({ type: "error" });
    expect(attemptCounts(engine)).toEqual({ timeout: 1 });
  });
});

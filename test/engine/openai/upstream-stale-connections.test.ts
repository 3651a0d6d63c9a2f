/**
 * A kept-alive connection the upstream closes just as a request goes out on it (its idle
 * keep-alive timeout, Node's 5 s `keepAliveTimeout`, uvicorn's 5 s) says nothing of the
 * endpoint's health: the request is sent again at once on a new connection, and the endpoint
 * does not rest for it. A reset of a new connection still counts.
 */
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
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

/**
 * An upstream that answers `text` on new connections, and closes a kept-alive connection when the
 * next request comes on it, as one whose idle timeout ran out just then (`reset`: with a TCP RST
 * rather than a FIN).
 */
function closingIdleConnections(text: string, options: { reset?: boolean } = {}): MockHandler {
  const used = new WeakSet<Socket>();
  return async (_request, response: ServerResponse) => {
    const socket = response.socket;
    if (socket === null) return;
    if (used.has(socket)) {
      if (options.reset === true) socket.resetAndDestroy();
      else socket.destroy();
      return;
    }
    used.add(socket);
    await writeEvents(response, textEvents([text]));
  };
}

/** The non-zero attempt counts of the engine's one endpoint, by outcome. */
function attemptCounts(engine: ChatEngine): Record<string, number> {
  const attempts = engine.upstreamActivity?.().attempts ?? [];
  return Object.fromEntries(
    attempts.filter((each) => each.count > 0).map((each) => [each.outcome, each.count]),
  );
}

describe("upstream engine: kept-alive connections the upstream closed", () => {
  for (const reset of [false, true]) {
    it(`sends the request again on a new connection and does not rest the endpoint (${reset ? "RST" : "FIN"})`, async () => {
      const upstream = await startTestMock(closingIdleConnections("Hi", { reset }));
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl]),
        // One fault would rest the only endpoint for longer than a request may wait.
        settings: { failureThreshold: 1, cooldownMs: 60_000, maxRetryWaitMs: 1_000, maxRetries: 0 },
      });
      for (let index = 0; index < 3; index++) {
        // Each comes once the last one's connection idles, as after an upstream's idle timeout.
        await sleep(20);
        expect(textOf(await collectParts(engine))).toBe("Hi");
        expect(engine.endpoints?.()).toEqual({ total: 1, resting: 0 });
      }
      // Some went out on a kept-alive connection, met it closed, and went again on a new one.
      const closed = upstream.requests.length - 3;
      expect(closed).toBeGreaterThan(0);
      expect(engine.status()).toBe("available");
      // Each closed connection was an attempt that failed as a reset does.
      expect(attemptCounts(engine)).toEqual({ ok: 3, transport_error: closed });
    });
  }

  it("does not send an endpoint just back from a cooldown back to rest for it", async () => {
    let failing = true;
    const idle = closingIdleConnections("back");
    const upstream = await startTestMock((request, response) => {
      if (!failing) return idle(request, response);
      response.writeHead(500, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message: "boom" } }));
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { failureThreshold: 1, cooldownMs: 200, maxRetryWaitMs: 0, maxRetries: 0 },
    });
    await firstError(engine);
    expect(engine.status()).toBe("unavailable");
    await sleep(250);
    failing = false;
    // The 500 left its connection open: the first request after the rest is sent on it.
    for (let index = 0; index < 3; index++) {
      expect(textOf(await collectParts(engine))).toBe("back");
      expect(engine.status()).toBe("available");
    }
  });

  it("rests an endpoint that drops a request on a kept-alive connection after taking it for a while, and does not send it again", async () => {
    // A request that crashes its upstream (out of memory on its prompt) must not be sent twice more.
    let served = 0;
    const upstream = await startTestMock(async (_request, response) => {
      served++;
      if (served === 1) return writeEvents(response, textEvents(["first"]));
      await sleep(1_200);
      response.socket?.destroy();
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { failureThreshold: 1, cooldownMs: 60_000, maxRetryWaitMs: 0, maxRetries: 0 },
    });
    expect(textOf(await collectParts(engine))).toBe("first");
    await sleep(20);
    expect(await firstError(engine)).toMatchObject({ code: "upstream_unavailable" });
    expect(upstream.requests).toHaveLength(2);
    expect(engine.status()).toBe("unavailable");
  });

  it("still rests an endpoint that resets a new connection", async () => {
    const upstream = await startTestMock((_request, response) => {
      response.socket?.destroy();
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { failureThreshold: 1, cooldownMs: 60_000, maxRetryWaitMs: 0, maxRetries: 3 },
    });
    expect(await firstError(engine)).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("closed the connection"),
    });
    expect(upstream.requests).toHaveLength(1);
    expect(engine.status()).toBe("unavailable");
    expect(attemptCounts(engine)).toEqual({ transport_error: 1 });
  });
});

import { afterEach, describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { until } from "../../support/until.ts";
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
import { answerError, chunk, resetAfter, sequence, streamText, writeEvents } from "./mock-upstream.ts";

const mock = startTestMock;

afterEach(closeEnginesAndMocks);

/** Polls until `condition` holds, or gives up after a while (the test's assertions then fail). */
/** The user message of a request the mock received. */
function messageOf(request: { body: Record<string, unknown> } | undefined): unknown {
  return (request?.body.messages as { content: unknown }[] | undefined)?.at(-1)?.content;
}

function lastType(parts: readonly StreamPart[]): string | undefined {
  return parts.at(-1)?.type;
}

describe("upstream engine: an endpoint that answers 200 and then breaks", () => {
  it("rests when it cuts every stream after some content (regression: never rested)", async () => {
    const broken = await mock(
      resetAfter([chunk({ role: "assistant", content: "" }), chunk({ content: "Partial" })]),
    );
    const healthy = await mock(streamText(["whole"]));
    const engine = createTestEngine({
      model: upstreamModel([broken.baseUrl, healthy.baseUrl]),
      settings: { cooldownMs: 20_000 },
    });
    const ends: (string | undefined)[] = [];
    for (let index = 0; index < 8; index++) ends.push(lastType(await collectParts(engine)));
    // Round-robin until its third broken answer in a row rests it; then the healthy one only.
    expect(broken.requests).toHaveLength(3);
    expect(ends.filter((type) => type === "error")).toHaveLength(3);
    expect(healthy.requests).toHaveLength(5);
  });

  it("rests when it closes every stream after the headers, before any content (regression)", async () => {
    const broken = await mock((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.flushHeaders();
      setTimeout(() => response.socket?.destroy(), 5);
    });
    const healthy = await mock(streamText(["whole"]));
    const engine = createTestEngine({
      model: upstreamModel([broken.baseUrl, healthy.baseUrl]),
      settings: { cooldownMs: 20_000 },
    });
    for (let index = 0; index < 6; index++) expect(textOf(await collectParts(engine))).toBe("whole");
    expect(broken.requests).toHaveLength(3);
  });

  it("does not count a client that left as the endpoint's failure", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [chunk({ content: "Once" }), ...Array(10).fill(chunk({ content: " more" }))], {
        delayMs: 20,
      }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    for (let index = 0; index < 4; index++) {
      const controller = new AbortController();
      const prepared = await engine.prepare(chatRequest());
      for await (const batch of prepared.run(controller.signal)) {
        if (batch.some((part) => part.type === "text-delta")) controller.abort();
      }
    }
    expect(engine.status()).toBe("available");
    expect(lastType(await collectParts(engine))).toBe("finish");
    expect(upstream.requests).toHaveLength(5);
  });
});

describe("upstream engine: pacing of retries", () => {
  it("goes at once only to endpoints the request has not tried, then backs off (regression)", async () => {
    const first = await mock(answerError(500));
    const second = await mock(answerError(500));
    const engine = createTestEngine({
      model: upstreamModel([first.baseUrl, second.baseUrl]),
      // A backoff longer than the request may wait: it gives up instead of pausing.
      settings: { retryBaseDelayMs: 60_000, retryMaxDelayMs: 60_000, maxRetryWaitMs: 10_000 },
    });
    expect(await firstError(engine)).toMatchObject({ code: "upstream_unavailable" });
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(1);
  });

  it("retries an endpoint it tried after a pause that fits", async () => {
    const first = await mock(sequence(1, answerError(500), streamText(["first"])));
    const second = await mock(sequence(1, answerError(500), streamText(["second"])));
    const engine = createTestEngine({ model: upstreamModel([first.baseUrl, second.baseUrl]) });
    expect(["first", "second"]).toContain(textOf(await collectParts(engine)));
    expect(first.requests.length + second.requests.length).toBe(3);
  });

  it("brings requests that wait for the same rest back one by one, not at once (regression)", async () => {
    const upstream = await mock(
      sequence(
        1,
        answerError(429, { error: { message: "slow down" } }, { "retry-after": "1" }),
        streamText(["ok"]),
      ),
    );
    // Random parts in the order the requests begin to wait: the first to wait comes back last.
    const draws = [0.99, 0.75, 0.5, 0.25, 0];
    let drawn = 0;
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      // Random parts of up to a second on top of the rest: far apart, whatever the load.
      settings: { retryBaseDelayMs: 1000, retryMaxDelayMs: 1000 },
      random: () => draws[drawn++] ?? 0,
    });
    const runs: Promise<StreamPart[]>[] = [];
    for (let index = 0; index < draws.length; index++) {
      runs.push(collectParts(engine, chatRequest({ messages: [{ role: "user", content: `r${index}` }] })));
      await until(() => drawn > index);
    }
    for (const parts of await Promise.all(runs)) expect(textOf(parts)).toBe("ok");
    expect(upstream.requests.map(messageOf)).toEqual(["r0", "r4", "r3", "r2", "r1", "r0"]);
  });
});

describe("upstream engine: an endpoint that begins to rest", () => {
  it("sends the requests still queued for its connections elsewhere, costing no retry (regression)", async () => {
    const hung = await mock(() => {});
    const healthy = await mock(streamText(["ok"]));
    const engine = createTestEngine({
      model: upstreamModel([hung.baseUrl, healthy.baseUrl]),
      settings: {
        maxConnections: 1,
        firstByteTimeoutMs: 200,
        failureThreshold: 1,
        cooldownMs: 20_000,
        maxRetries: 0,
      },
    });
    // Round-robin: the first and third go to the hung endpoint, the third queued behind the first.
    const runs = Array.from({ length: 4 }, (_, index) =>
      collectParts(engine, chatRequest({ messages: [{ role: "user", content: `r${index}` }] })).catch(
        (error: unknown) => error,
      ),
    );
    const [first, ...others] = await Promise.all(runs);
    expect(first).toMatchObject({ code: "upstream_unavailable" });
    expect(others.map((result) => (Array.isArray(result) ? textOf(result) : result))).toEqual([
      "ok",
      "ok",
      "ok",
    ]);
    expect(hung.requests.map(messageOf)).toEqual(["r0"]);
  });
});

/**
 * A client told `x-should-retry: false` stops for good (the OpenAI SDKs do): an endpoint or a
 * fallback that only rests, and will be back, must not leave the client with that advice when
 * the one that failed was refused for its set-up (a wrong api_key).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { UpstreamSettings } from "../../../src/engine/openai/upstream-settings.ts";
import {
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError, type MockHandler, sequence, streamText } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** What a client is told about retrying: `retryable: false` is `x-should-retry: false`. */
const advice = (error: unknown) => {
  const { code, status, message, retryable, retryAfterSeconds } = error as Record<string, unknown>;
  return { code, status, message, retryable, retryAfterSeconds };
};

const refusedKey = answerError(401, { error: { message: "Incorrect API key provided" } });
/** A 429 that rests its endpoint 20 s, fault or not. */
const limited = answerError(429, { error: { message: "slow down" } }, { "retry-after": "20" });

describe("upstream engine: retry advice while another endpoint rests", () => {
  for (const maxRetries of [0, 2]) {
    it(`says retry once the resting endpoint is back when the other refuses the key (maxRetries ${maxRetries})`, async () => {
      const resting = await startTestMock(limited);
      const refusing = await startTestMock(refusedKey);
      const engine = createTestEngine({
        model: upstreamModel([resting.baseUrl, refusing.baseUrl]),
        // The refusing endpoint does not rest after one failure: it is left out for its key alone.
        settings: { maxRetries, failureThreshold: 3, maxRetryWaitMs: 1_000 },
      });
      // The first request goes to the first endpoint, whose 429 rests it (and, with retries, on
      // to the other).
      expect(advice(await firstError(engine))).toMatchObject({ retryable: true });
      expect(engine.endpoints?.()).toEqual({ total: 2, resting: 1 });
      // The next only reaches the refusing one: not a reason to give up while the other is back in 20 s.
      expect(advice(await firstError(engine))).toMatchObject({
        code: "upstream_unavailable",
        message: expect.stringContaining("refused Tollgate's credentials (HTTP 401)"),
        retryable: true,
        retryAfterSeconds: 20,
      });
      expect([resting.requests.length, refusing.requests.length]).toEqual([1, maxRetries === 0 ? 1 : 2]);
    });
  }

  it("does not wait out a rest begun by refused keys: fails at once, saying when it is tried again (regression: waited, asked again, retry in 1 s)", async () => {
    const refusing = await startTestMock(refusedKey);
    const engine = createTestEngine({
      model: upstreamModel([refusing.baseUrl]),
      settings: { maxRetries: 2, failureThreshold: 3, cooldownMs: 5_000, maxRetryWaitMs: 10_000 },
    });
    for (let attempt = 0; attempt < 3; attempt++) await firstError(engine);
    expect(engine.endpoints?.()).toEqual({ total: 1, resting: 1 });
    const asked = refusing.requests.length;
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("refused Tollgate's credentials (HTTP 401)"),
      retryable: false,
      retryAfterSeconds: 5,
    });
    expect(refusing.requests.length).toBe(asked);
  });

  it("still says no retry can help when every endpoint refused the key", async () => {
    const first = await startTestMock(refusedKey);
    const second = await startTestMock(refusedKey);
    const engine = createTestEngine({
      model: upstreamModel([first.baseUrl, second.baseUrl]),
      settings: { maxRetries: 2, failureThreshold: 3 },
    });
    expect(advice(await firstError(engine))).toMatchObject({
      retryable: false,
      retryAfterSeconds: undefined,
    });
    expect([first.requests.length, second.requests.length]).toEqual([1, 1]);
  });

  it("says retry when the retries ran out before another endpoint was asked", async () => {
    const first = await startTestMock(refusedKey);
    const second = await startTestMock(streamText(["from the second"]));
    const engine = createTestEngine({
      model: upstreamModel([first.baseUrl, second.baseUrl]),
      settings: { maxRetries: 0, failureThreshold: 3 },
    });
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true, retryAfterSeconds: 1 });
    expect(textOf(await collectParts(engine))).toBe("from the second");
  });
});

/**
 * A model `primary` whose upstream answers with `upstreams.primary` (a refused key unless given),
 * with the fallback `backup`, whose one endpoint answers with `upstreams.fallback` (a 500, then
 * text, unless given) and has failed once, on a request of its own, and rests.
 */
async function primaryWithRestingFallback(
  settings: Partial<UpstreamSettings>,
  upstreams: { primary?: MockHandler; fallback?: MockHandler } = {},
) {
  const primaryUpstream = await startTestMock(upstreams.primary ?? refusedKey);
  const fallbackUpstream = await startTestMock(
    upstreams.fallback ??
      sequence(1, answerError(500, { error: { message: "boom" } }), streamText(["from the backup"])),
  );
  const backup = createTestEngine({
    model: upstreamModel([fallbackUpstream.baseUrl], { id: "backup" }),
    settings: { ...settings, failureThreshold: 1 },
  });
  const engine = createTestEngine({
    model: upstreamModel([primaryUpstream.baseUrl], { id: "primary", fallbacks: ["backup"] }),
    resolveEngine: (id) => (id === "backup" ? backup : undefined),
    settings,
  });
  await firstError(backup);
  expect(backup.status()).toBe("unavailable");
  return { engine, backup, fallbackUpstream };
}

describe("upstream engine: retry advice while a fallback rests", () => {
  it("says retry once an unavailable fallback is back, not the primary's refused key (regression)", async () => {
    const { engine, fallbackUpstream } = await primaryWithRestingFallback({
      maxRetries: 0,
      cooldownMs: 3_000,
    });
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("'primary' refused Tollgate's credentials"),
      retryable: true,
      retryAfterSeconds: 3,
    });
    // Skipped, not asked.
    expect(fallbackUpstream.requests).toHaveLength(1);
  });

  it("serves the retry from the fallback once it is back", async () => {
    const { engine } = await primaryWithRestingFallback({ maxRetries: 0, cooldownMs: 300 });
    const error = advice(await firstError(engine));
    expect(error).toMatchObject({ retryable: true, retryAfterSeconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(textOf(await collectParts(engine))).toBe("from the backup");
  });
});

// Regression (verification of the rests' causes): an endpoint or a fallback that rests for a
// failure only the operator can mend was counted as one a retry may find back, so a request that
// reached another endpoint, or skipped the fallback, was told to retry in a minute for nothing.
describe("upstream engine: no retry advice from rests only the operator can end", () => {
  it("says no retry can help when the endpoint asked is refused and the other rests for its key", async () => {
    const refusing = await startTestMock(refusedKey);
    const missing = await startTestMock(answerError(404, { error: { message: "model not found" } }));
    const engine = createTestEngine({
      model: upstreamModel([refusing.baseUrl, missing.baseUrl]),
      settings: { maxRetries: 0, failureThreshold: 1, cooldownMs: 60_000 },
    });
    // The first request reaches the first endpoint, which rests for its key; the second one is
    // not asked: a retry may be served by it.
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true });
    // The next reaches the second, which has no such model: nothing left passes.
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("answered HTTP 404"),
      retryable: false,
    });
    expect([refusing.requests.length, missing.requests.length]).toEqual([1, 1]);
  });

  it("says no retry can help when the fallback skipped rests for its key", async () => {
    const { engine, fallbackUpstream } = await primaryWithRestingFallback(
      { maxRetries: 0, failureThreshold: 1, cooldownMs: 60_000 },
      { primary: answerError(403, { error: { message: "forbidden" } }), fallback: refusedKey },
    );
    expect(advice(await firstError(engine))).toMatchObject({
      message: expect.stringContaining("'primary' refused Tollgate's credentials (HTTP 403)"),
      retryable: false,
    });
    expect(fallbackUpstream.requests).toHaveLength(1);
  });
});

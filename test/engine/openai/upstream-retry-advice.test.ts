import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import type { UpstreamSettings } from "../../../src/engine/openai/upstream-settings.ts";
import {
  closeEnginesAndMocks,
  createTestEngine,
  firstError,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError, type MockHandler } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** What a client is told about retrying: `retryable: false` is `x-should-retry: false`. */
const advice = (error: unknown) => {
  const { code, status, message, retryable, retryAfterSeconds } = error as Record<string, unknown>;
  return { code, status, message, retryable, retryAfterSeconds };
};

const refusedKey = answerError(401, { error: { message: "Incorrect API key provided" } });
const serverError = answerError(500, { error: { message: "boom", type: "server_error" } });

/** A model on one upstream answering `primary`, falling back to one on an upstream answering `fallback`. */
async function modelWithFallback(
  primary: MockHandler,
  fallback: MockHandler,
  settings: Partial<UpstreamSettings> = { maxRetries: 0 },
): Promise<ChatEngine> {
  const primaryUpstream = await startTestMock(primary);
  const fallbackUpstream = await startTestMock(fallback);
  const backup = createTestEngine({
    model: upstreamModel([fallbackUpstream.baseUrl], { id: "backup" }),
    settings,
  });
  return createTestEngine({
    model: upstreamModel([primaryUpstream.baseUrl], { id: "primary", fallbacks: ["backup"] }),
    resolveEngine: (id) => (id === "backup" ? backup : undefined),
    settings,
  });
}

describe("upstream engine: whether the client is told to retry, after its fallbacks failed too", () => {
  // Regression: the primary's x-should-retry: false was passed on as it was, and the OpenAI SDKs
  // stopped retrying, while the fallback might be back the next second.
  it("does not say no retry can help when the primary's key is refused but a fallback's failure passes", async () => {
    const engine = await modelWithFallback(refusedKey, serverError);
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      status: 503,
      message: expect.stringContaining("refused Tollgate's credentials (HTTP 401)"),
      retryable: true,
    });
  });

  it("says retry when the primary's failure passes and a fallback's key is refused", async () => {
    const engine = await modelWithFallback(serverError, refusedKey);
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("answered HTTP 500"),
      retryable: true,
    });
  });

  it("still says no retry can help when every failure is the operator's to fix", async () => {
    const engine = await modelWithFallback(refusedKey, refusedKey);
    expect(advice(await firstError(engine))).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringContaining("'primary' refused Tollgate's credentials"),
      retryable: false,
    });
  });

  it("asks for a retry as soon as a fallback may serve it, not after the primary's long retry-after (regression)", async () => {
    const engine = await modelWithFallback(
      answerError(429, { error: { message: "slow down" } }, { "retry-after": "30" }),
      serverError,
    );
    // The fallback's endpoint does not rest after one failure: a retry at once can reach it.
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true, retryAfterSeconds: 1 });
  });
});

describe("upstream engine: retry-after, while the endpoints rest", () => {
  it("asks the client to wait out the cooldown the failure began, as the next request is told (regression: 1 s)", async () => {
    const upstream = await startTestMock(serverError);
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0, failureThreshold: 1, cooldownMs: 5_000 },
    });
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true, retryAfterSeconds: 5 });
    // A retry any sooner fails at once, without reaching the upstream.
    expect(advice(await firstError(engine))).toMatchObject({ retryAfterSeconds: 5 });
    expect(upstream.requests).toHaveLength(1);
  });

  it("asks to wait out a rest longer than the request may pause for (regression: 1 s)", async () => {
    const upstream = await startTestMock(serverError);
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 2, failureThreshold: 1, cooldownMs: 20_000, maxRetryWaitMs: 1_000 },
    });
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true, retryAfterSeconds: 20 });
    expect(upstream.requests).toHaveLength(1);
  });

  it("names the time the first of several endpoints is back", async () => {
    // The first rests 5 s on its 429's retry-after, the second 20 s after its 500.
    const limited = await startTestMock(answerError(429, {}, { "retry-after": "5" }));
    const failing = await startTestMock(serverError);
    const engine = createTestEngine({
      model: upstreamModel([limited.baseUrl, failing.baseUrl]),
      settings: { maxRetries: 1, failureThreshold: 1, cooldownMs: 20_000, maxRetryWaitMs: 1_000 },
    });
    expect(advice(await firstError(engine))).toMatchObject({
      message: expect.stringContaining("answered HTTP 500"),
      retryAfterSeconds: 5,
    });
    expect([limited.requests.length, failing.requests.length]).toEqual([1, 1]);
  });

  it("leaves out an endpoint whose key is refused, which would fail a retry again", async () => {
    const refusing = await startTestMock(refusedKey);
    const limited = await startTestMock(answerError(429, {}, { "retry-after": "7" }));
    const engine = createTestEngine({
      model: upstreamModel([refusing.baseUrl, limited.baseUrl]),
      settings: { maxRetries: 1, failureThreshold: 2, maxRetryWaitMs: 1_000 },
    });
    // The refusing endpoint does not rest after one failure; only the other could serve a retry.
    expect(advice(await firstError(engine))).toMatchObject({ retryable: true, retryAfterSeconds: 7 });
    expect([refusing.requests.length, limited.requests.length]).toEqual([1, 1]);
  });
});

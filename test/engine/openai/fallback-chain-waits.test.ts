import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine, StreamPart } from "../../../src/engine/engine.ts";
import type { UpstreamSettings } from "../../../src/engine/openai/upstream-settings.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  createTestEngine,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError, type MockUpstream, sequence, streamText } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** Runs one request to its end: its parts and the catalogue id of the fallback that served it. */
async function serve(engine: ChatEngine): Promise<{ parts: StreamPart[]; servedBy: string | undefined }> {
  const prepared = await engine.prepare(chatRequest());
  const parts: StreamPart[] = [];
  for await (const batch of prepared.run(new AbortController().signal)) parts.push(...batch);
  return { parts, servedBy: prepared.servedBy?.() };
}

/** Models on one mock upstream each, resolved by id; the first is the one asked for. */
function createChain(
  links: readonly {
    id: string;
    upstream: MockUpstream;
    fallbacks?: string[];
    settings?: Partial<UpstreamSettings>;
    random?: () => number;
  }[],
): Map<string, ChatEngine> {
  const engines = new Map<string, ChatEngine>();
  for (const link of links) {
    const model = upstreamModel([link.upstream.baseUrl], { id: link.id, fallbacks: link.fallbacks ?? [] });
    const resolveEngine = (id: string) => engines.get(id);
    engines.set(
      link.id,
      createTestEngine({ model, resolveEngine, settings: link.settings, random: link.random }),
    );
  }
  return engines;
}

describe("upstream engine: waits along a chain of fallbacks", () => {
  // One failure rests an endpoint, for long enough that it is still resting when the request
  // decides whether to wait for it; a request may wait far longer than that in all.
  const resting: Partial<UpstreamSettings> = {
    failureThreshold: 1,
    cooldownMs: 200,
    maxRetries: 1,
    maxRetryWaitMs: 60_000,
  };

  it("goes on to the next fallback at once when a fallback's endpoints rest (regression: waited 10 s per fallback)", async () => {
    const failing = await Promise.all(
      ["primary", "c1", "c2", "c3"].map(() => startTestMock(answerError(500))),
    );
    const good = await startTestMock(streamText(["from good"]));
    const [primary, c1, c2, c3] = failing as [MockUpstream, MockUpstream, MockUpstream, MockUpstream];
    const engines = createChain([
      { id: "primary", upstream: primary, fallbacks: ["c1", "c2", "c3", "good"], settings: resting },
      { id: "c1", upstream: c1, settings: resting },
      { id: "c2", upstream: c2, settings: resting },
      { id: "c3", upstream: c3, settings: resting },
      { id: "good", upstream: good, settings: resting },
    ]);
    const { parts, servedBy } = await serve(engines.get("primary")!);
    expect(textOf(parts)).toBe("from good");
    expect(servedBy).toBe("good");
    // Each failing model was asked once: none waited for its resting endpoint to try it again.
    expect(failing.map((upstream) => upstream.requests.length)).toEqual([1, 1, 1, 1]);
    expect(good.requests).toHaveLength(1);
  });

  it("lets the last fallback that could serve wait for its resting endpoint", async () => {
    const primary = await startTestMock(answerError(500));
    const c1 = await startTestMock(answerError(500));
    const last = await startTestMock(sequence(1, answerError(500), streamText(["after the rest"])));
    const engines = createChain([
      { id: "primary", upstream: primary, fallbacks: ["c1", "last", "missing"], settings: resting },
      { id: "c1", upstream: c1, settings: resting },
      { id: "last", upstream: last, settings: resting },
    ]);
    const { parts, servedBy } = await serve(engines.get("primary")!);
    expect(textOf(parts)).toBe("after the rest");
    expect(servedBy).toBe("last");
    expect([primary, c1, last].map((upstream) => upstream.requests.length)).toEqual([1, 1, 2]);
  });

  it("bounds the pauses of the model and its fallbacks together by the model's maxRetryWaitMs (regression)", async () => {
    // The primary backs off twice, 100 ms each (no jitter), from a budget of 250 ms: 50 ms are
    // left, less than the fallback's 100 ms rest, which on a budget of its own it would wait.
    const primary = await startTestMock(answerError(500));
    const backup = await startTestMock(sequence(1, answerError(500), streamText(["after the rest"])));
    const engines = createChain([
      {
        id: "primary",
        upstream: primary,
        fallbacks: ["backup"],
        settings: { maxRetries: 2, retryBaseDelayMs: 100, retryMaxDelayMs: 100, maxRetryWaitMs: 250 },
        random: () => 1,
      },
      {
        id: "backup",
        upstream: backup,
        settings: { failureThreshold: 1, cooldownMs: 100, maxRetryWaitMs: 250 },
        random: () => 0,
      },
    ]);
    await expect(serve(engines.get("primary")!)).rejects.toMatchObject({ code: "upstream_unavailable" });
    expect(primary.requests).toHaveLength(3);
    expect(backup.requests).toHaveLength(1);
  });
});

/**
 * A client that leaves while a fallback waits (a full queue, an upstream's retry-after) was
 * recorded as served by that fallback, and counted so in tollgate_upstream_fallbacks_total,
 * although the fallback had only ever answered 429 (found by a routing review): the fallback's
 * abort finish was taken for its first part.
 */
import { describe, expect, it } from "vitest";
import type { ChatEngine, PartBatch, PreparedChat } from "../../../src/engine/engine.ts";
import { runWithFallbacks } from "../../../src/engine/openai/run-with-fallbacks.ts";
import { AppError } from "../../../src/errors/app-error.ts";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function* failing(): AsyncGenerator<PartBatch> {
  yield* [];
  throw new AppError("upstream_unavailable", "down");
}

/** A fallback's run as the upstream engine ends one whose client left while it waited. */
function leftWhileWaiting(controller: AbortController): () => AsyncIterable<PartBatch> {
  return async function* () {
    controller.abort(new Error("client left"));
    yield [
      { type: "finish", reason: "stop", rawReason: "abort", usage: { promptTokens: 8, completionTokens: 0 } },
    ];
  };
}

async function collect(run: AsyncIterable<PartBatch>): Promise<PartBatch[]> {
  const batches: PartBatch[] = [];
  for await (const batch of run) batches.push(batch);
  return batches;
}

describe("a client that leaves while a fallback waits", () => {
  it("ends the request as the primary's: no fallback served it, none is counted", async () => {
    const controller = new AbortController();
    const served: string[] = [];
    const counted: [string, string][] = [];
    const batches = await collect(
      runWithFallbacks({
        modelId: "primary",
        primary: failing(),
        fallbacks: ["a", "b"],
        resolveEngine: () => ({ status: () => "available" }) as unknown as ChatEngine,
        prepareFallback: async () => ({ run: leftWhileWaiting(controller) }) as unknown as PreparedChat,
        request: {} as never,
        signal: controller.signal,
        logger: silent as never,
        onFallback: (id) => served.push(id),
        countFallback: (id, outcome) => counted.push([id, outcome]),
      }),
    );
    expect(served).toEqual([]);
    expect(counted).toEqual([]);
    expect(batches).toEqual([
      [
        {
          type: "finish",
          reason: "stop",
          rawReason: "abort",
          usage: { promptTokens: undefined, completionTokens: 0 },
        },
      ],
    ]);
  });

  it("still counts a fallback that served before the client left", async () => {
    const controller = new AbortController();
    const served: string[] = [];
    await collect(
      runWithFallbacks({
        modelId: "primary",
        primary: failing(),
        fallbacks: ["a"],
        resolveEngine: () => ({ status: () => "available" }) as unknown as ChatEngine,
        prepareFallback: async () =>
          ({
            run: async function* () {
              yield [{ type: "text", text: "Hi" }];
              controller.abort(new Error("client left"));
              yield [
                {
                  type: "finish",
                  reason: "stop",
                  rawReason: "abort",
                  usage: { promptTokens: 8, completionTokens: 1 },
                },
              ];
            },
          }) as unknown as PreparedChat,
        request: {} as never,
        signal: controller.signal,
        logger: silent as never,
        onFallback: (id) => served.push(id),
      }),
    );
    expect(served).toEqual(["a"]);
  });
});

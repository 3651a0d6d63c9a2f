/**
 * The account a request spends from reaches its engine's run (RunOptions.tenant), where the
 * model's queue is shared fairly between accounts (fair-queue.ts): on the engine it started on, on
 * the engine a reload moved it to, and on a fallback that served it. Without it, its requests
 * would wait in the line of requests with no account, shared by everyone.
 */
import { describe, expect, it } from "vitest";
import { followReloads } from "../../src/chat/follow-reloads.ts";
import type { ChatEngine, PartBatch, PreparedChat, RunOptions } from "../../src/engine/engine.ts";
import { runWithFallbacks } from "../../src/engine/openai/run-with-fallbacks.ts";
import { AppError } from "../../src/errors/app-error.ts";
import type { ModelRegistry } from "../../src/models/model-registry.ts";
import { createChatRequest } from "../support/create-chat-request.ts";

const finish: PartBatch = [
  { type: "finish", reason: "stop", rawReason: "stop", usage: { promptTokens: 1, completionTokens: 0 } },
];

/** A prepared run that records the options each run was given, and runs `batches`. */
function recordingRun(
  runs: (RunOptions | undefined)[],
  batches: () => AsyncIterable<PartBatch>,
): PreparedChat {
  return {
    promptTokens: 1,
    maxCompletionTokens: 8,
    run(_signal, options) {
      runs.push(options);
      return batches();
    },
  };
}

/** An engine whose prepare answers `prepared`. */
function engineWith(prepared: PreparedChat): ChatEngine {
  return { status: () => "available", prepare: async () => prepared } as unknown as ChatEngine;
}

describe("the account a run is for", () => {
  it("is given to the run on its engine, and to the run a reload moves it to", async () => {
    const oldRuns: (RunOptions | undefined)[] = [];
    const newRuns: (RunOptions | undefined)[] = [];
    let moved: Promise<void> | undefined;
    const old = recordingRun(oldRuns, async function* () {
      // Waiting for its turn when the reload comes: it leaves for the new engine.
      moved = oldRuns[0]?.onRetired?.(() => true, 0);
      await moved;
    });
    const replacement = engineWith(
      recordingRun(newRuns, async function* () {
        yield finish;
      }),
    );
    const registry = {
      get: () => ({ model: { kind: "chat" }, engine: replacement }),
      hold: () => () => {},
    } as unknown as ModelRegistry;
    const run = followReloads({
      registry,
      modelId: "m",
      request: createChatRequest(),
      prepareOptions: { signal: new AbortController().signal },
      engine: engineWith(old),
      prepared: old,
      release: () => {},
      tenant: "account-1",
    });
    const first = await run.first();
    await moved;
    expect(first.value).toEqual(finish);
    expect(oldRuns.map((options) => options?.tenant)).toEqual(["account-1"]);
    expect(newRuns.map((options) => options?.tenant)).toEqual(["account-1"]);
  });

  it("is given to the run of a fallback that serves", async () => {
    const fallbackRuns: (RunOptions | undefined)[] = [];
    const fallback = recordingRun(fallbackRuns, async function* () {
      yield finish;
    });
    const batches: PartBatch[] = [];
    for await (const batch of runWithFallbacks({
      modelId: "primary",
      primary: (async function* () {
        yield* [];
        throw new AppError("upstream_unavailable", "every endpoint refused the connection");
      })(),
      fallbacks: ["backup"],
      resolveEngine: () => engineWith(fallback),
      prepareFallback: async () => fallback,
      request: createChatRequest(),
      signal: new AbortController().signal,
      tenant: "account-2",
      logger: { warn() {}, info() {}, error() {}, debug() {} } as never,
    }))
      batches.push(batch);
    expect(batches).toEqual([finish]);
    expect(fallbackRuns.map((options) => options?.tenant)).toEqual(["account-2"]);
  });
});

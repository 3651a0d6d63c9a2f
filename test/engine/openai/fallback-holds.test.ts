/**
 * runWithFallbacks holds the fallbacks' engines (EngineContext.holdEngine) so that a reload cannot
 * close one under a request admitted with it, and lets each go as soon as it is not needed: all at
 * the primary's first part, all but the serving one once a fallback serves, the rest at the end.
 * A hold never let go would keep a replaced engine (a local model's memory) open for good.
 */
import { describe, expect, it } from "vitest";
import type { ChatEngine, PartBatch, PreparedChat } from "../../../src/engine/engine.ts";
import { runWithFallbacks } from "../../../src/engine/openai/run-with-fallbacks.ts";
import { AppError } from "../../../src/errors/app-error.ts";

const silent = { info() {}, warn() {}, error() {}, debug() {} };
const text = (value: string): PartBatch => [{ type: "text", text: value }] as unknown as PartBatch;

function fakeEngine(): ChatEngine {
  return { status: () => "available" } as unknown as ChatEngine;
}

async function* parts(...values: string[]): AsyncGenerator<PartBatch> {
  for (const value of values) yield text(value);
}

async function* failing(): AsyncGenerator<PartBatch> {
  yield* [];
  throw new AppError("upstream_unavailable", "down");
}

function setUp(primary: AsyncIterable<PartBatch>) {
  const engines = new Map([
    ["a", fakeEngine()],
    ["b", fakeEngine()],
  ]);
  const held = new Map<ChatEngine, number>();
  const run = runWithFallbacks({
    modelId: "primary",
    primary,
    fallbacks: ["a", "b"],
    resolveEngine: (id) => engines.get(id),
    holdEngine: (engine) => {
      held.set(engine, (held.get(engine) ?? 0) + 1);
      return () => held.set(engine, (held.get(engine) ?? 0) - 1);
    },
    prepareFallback: async () => ({ run: () => parts("from a", " and more") }) as unknown as PreparedChat,
    request: {} as never,
    signal: new AbortController().signal,
    logger: silent as never,
  });
  const heldNow = (id: string) => held.get(engines.get(id)!) ?? 0;
  return { run: run[Symbol.asyncIterator](), heldNow };
}

describe("the fallbacks' engines a request holds", () => {
  it("are all let go at the primary's first part", async () => {
    const { run, heldNow } = setUp(parts("one", "two"));
    expect(heldNow("a")).toBe(0);
    await run.next();
    expect([heldNow("a"), heldNow("b")]).toEqual([0, 0]);
    await run.next();
    await run.next();
    expect([heldNow("a"), heldNow("b")]).toEqual([0, 0]);
  });

  it("are held while the primary fails, the serving one until the run ends", async () => {
    const { run, heldNow } = setUp(failing());
    const first = await run.next();
    expect(first.value).toEqual(text("from a"));
    expect([heldNow("a"), heldNow("b")]).toEqual([1, 0]);
    await run.next();
    expect((await run.next()).done).toBe(true);
    expect([heldNow("a"), heldNow("b")]).toEqual([0, 0]);
  });

  it("are let go when the consumer stops early", async () => {
    const { run, heldNow } = setUp(failing());
    await run.next();
    await run.return?.(undefined);
    expect([heldNow("a"), heldNow("b")]).toEqual([0, 0]);
  });
});

/**
 * A local fallback still loading (its file downloading) is waited for as the request's own: a
 * client that leaves stops waiting, and its account shares the places of those waiting with the
 * others. Prepared without the request's signal and account, requests whose clients had left held
 * their places (and their reservations) until the download ended, about 92 s in a verifier's run,
 * and every account's requests waited as one account's (found by the verifier).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ChatEngine, PrepareOptions } from "../../../src/engine/engine.ts";
import { findFreePort } from "../../support/free-port.ts";
import { chatRequest, closeEnginesAndMocks, createTestEngine, upstreamModel } from "./engine-helpers.ts";

afterEach(closeEnginesAndMocks);

/** A local engine whose model loads for ever: its prepare waits until the request's signal aborts. */
function loadingEngine(seen: PrepareOptions[]): ChatEngine {
  return {
    contextLength: undefined,
    supportsMultipleChoices: false,
    status: () => "loading",
    prepare: (_request: unknown, options: PrepareOptions = {}) => {
      seen.push(options);
      return new Promise((_resolve, reject) => {
        options.signal?.addEventListener("abort", () => reject(options.signal?.reason), { once: true });
      });
    },
    close: async () => {},
  } as unknown as ChatEngine;
}

describe("a local fallback that is still loading", () => {
  it("is waited for with the request's signal and account: a client that leaves stops waiting", async () => {
    const seen: PrepareOptions[] = [];
    const local = loadingEngine(seen);
    const closed = await findFreePort();
    const engine = createTestEngine({
      model: upstreamModel([`http://127.0.0.1:${closed}/v1`], { fallbacks: ["local"] }),
      resolveEngine: (id) => (id === "local" ? local : undefined),
    });
    const prepared = await engine.prepare(chatRequest());
    const controller = new AbortController();
    const first = prepared.run(controller.signal, { tenant: "acme" })[Symbol.asyncIterator]().next();
    await vi.waitFor(() => expect(seen).toHaveLength(1));
    expect(seen[0]?.tenant).toBe("acme");
    controller.abort(new Error("client left"));
    // The run ends as the client's leaving ends it, not when the model is loaded (never, here).
    expect(await first).toMatchObject({ value: [{ type: "finish", rawReason: "abort" }] });
  });
});

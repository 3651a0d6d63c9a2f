/**
 * createLoadWaiters: requests for a model still loading wait for it, as many as could run and
 * queue once it is loaded; the next is refused with 503 `model_overloaded`, in words that count
 * the waiting requests right (a model with room for one said "1 requests already wait").
 */
import { describe, expect, it } from "vitest";
import { createLoadWaiters } from "../../../src/engine/llama/wait-for-load.ts";
import { AppError } from "../../../src/errors/app-error.ts";

/** A load that never ends, and the refusal the request after `capacity` waiting ones gets. */
async function refusalAfter(capacity: number): Promise<AppError> {
  const waiters = createLoadWaiters({ modelId: "tiny", capacity, loading: () => new Promise(() => {}) });
  const leaving = new AbortController();
  const waiting = Array.from({ length: capacity }, () =>
    waiters.wait(leaving.signal).catch((error: unknown) => error),
  );
  const refused = await waiters.wait(undefined).catch((error: unknown) => error);
  leaving.abort(new Error("client left"));
  for (const left of await Promise.all(waiting)) expect((left as Error).message).toBe("client left");
  expect(refused).toBeInstanceOf(AppError);
  return refused as AppError;
}

describe("a request beyond those waiting for a model to load", () => {
  it("is refused with 503 model_overloaded naming one waiting request in the singular", async () => {
    const refused = await refusalAfter(1);
    expect(refused.code).toBe("model_overloaded");
    expect(refused.status).toBe(503);
    expect(refused.message).toContain("and a request already waits for it.");
  });

  it("counts several waiting requests in the plural", async () => {
    expect((await refusalAfter(3)).message).toContain("and 3 requests already wait for it.");
  });
});

describe("the places of requests waiting for a model to load", () => {
  it("are shared between accounts: a full wait makes room for one waiting with fewer (regression: one burst kept every other account out)", async () => {
    const load = Promise.withResolvers<void>();
    const waiters = createLoadWaiters({ modelId: "tiny", capacity: 3, loading: () => load.promise });
    const outcome = (waited: Promise<void>) =>
      waited.then(
        () => "served",
        (error: unknown) => (error instanceof AppError ? error.code : String(error)),
      );
    const burst = [1, 2, 3].map(() => outcome(waiters.wait(undefined, "batch")));
    // The burst's own next request, and another account's: the latter takes the burst's latest place.
    const burstMore = outcome(waiters.wait(undefined, "batch"));
    const other = outcome(waiters.wait(undefined, "interactive"));
    // Now two of the burst and one of the other wait: loads that differ by one stay as they are.
    const otherMore = outcome(waiters.wait(undefined, "interactive"));
    load.resolve();
    expect(await Promise.all(burst)).toEqual(["served", "served", "model_overloaded"]);
    expect(await burstMore).toBe("model_overloaded");
    expect(await other).toBe("served");
    expect(await otherMore).toBe("model_overloaded");
  });
});

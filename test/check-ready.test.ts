import { describe, expect, it } from "vitest";
import { checkReady } from "../src/check-ready.ts";
import type { ModelRegistry } from "../src/models/model-registry.ts";
import type { Store } from "../src/store/store.ts";

/** checkReady with a store whose read answers (or fails) and `pending` charges waiting. */
async function probe(answers: boolean, pending: number) {
  let probed = 0;
  const store = { hasAdminKey: () => (answers ? Promise.resolve(true) : Promise.reject(new Error("down"))) };
  const result = await checkReady({
    store: store as unknown as Store,
    registry: { list: () => [] } as unknown as ModelRegistry,
    startupEngines: new Set(),
    pendingSettlements: () => pending,
    probePendingSettlements: () => {
      probed++;
    },
  });
  return { ...result, probed };
}

describe("checkReady", () => {
  it("tries a waiting charge at once when the store answers, so readiness follows the store's return (regression: up to 30 s later)", async () => {
    expect(await probe(true, 2)).toEqual({
      ready: false,
      reasons: ["the store does not take writes: 2 charges wait to be recorded"],
      probed: 1,
    });
  });

  it("does not try one while the store does not answer, nor with none waiting", async () => {
    expect((await probe(false, 1)).probed).toBe(0);
    expect(await probe(true, 0)).toEqual({ ready: true, reasons: [], probed: 0 });
  });
});

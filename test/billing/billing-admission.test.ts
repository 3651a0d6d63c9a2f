import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BillingAdmission } from "../../src/billing/reserve-and-settle.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import { isAppError } from "../../src/errors/app-error.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeAccount } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** 1.00 per million tokens in and out: 1,000 nano-units a token. */
const model: CatalogModel = {
  id: "priced",
  kind: "chat",
  ownedBy: "test",
  pricing: { kind: "chat", inputPerMillion: "1.00", outputPerMillion: "1.00" },
  contextLength: 1000,
  created: 1_700_000_000,
  engine: undefined,
};

describe("BillingAdmission refusing a reservation", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
  });
  afterEach(async () => {
    await store.close();
  });

  it("tells the available balance from the account row, never summing the account's usage", async () => {
    const account = makeAccount({ name: "short", balanceNano: 50_000n });
    await store.insertAccount(account);
    // What the account spent sums every usage row it has: a refusal must not pay for that.
    const admission = new BillingAdmission({
      store: {
        ...store,
        getAccountMoney: () => Promise.reject(new Error("a refusal summed the account's usage")),
      },
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
    });
    const key: RequestKey = {
      publicId: "keypublic001",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
    };
    const request = {
      requestId: "req_1",
      key,
      model,
      user: undefined,
      setHeader: () => {},
      annotate: () => {},
    };
    const held = await admission.admit({ ...request, promptTokens: 10, maxCompletionTokens: 20 });
    const refused = await admission.admit({ ...request, promptTokens: 10, maxCompletionTokens: 100 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isAppError(refused) && refused.code).toBe("insufficient_balance");
    // 50,000 less the 30,000 the first request holds.
    expect((refused as Error).message).toContain("(0.00002)");
    await held.settle({
      usage: { promptTokens: 10, completionTokens: 5 },
      finishReason: "stop",
      errorCode: undefined,
      timings: { firstPartMs: 1, totalMs: 2 },
    });
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 35_000n,
      reservedNano: 0n,
      spentNano: 15_000n,
    });
  });
});

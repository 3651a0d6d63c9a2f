import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { BillingAdmission } from "../../src/billing/reserve-and-settle.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import { isAppError } from "../../src/errors/app-error.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** The largest amount a store holds: 2^63 − 1 nano-units. */
const MAX_NANO = 9_223_372_036_854_775_807n;

// Top-level await: whether PostgreSQL is there decides which suites this file declares.
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL billing tests: ${probe.skipped}.`);
afterAll(async () => {
  if (!("skipped" in probe)) await probe.drop();
});

function chatModel(id: string, inputPerMillion: string, outputPerMillion: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "test",
    pricing: { kind: "chat", inputPerMillion, outputPerMillion },
    contextLength: 2_000_000_000,
    created: 1_700_000_000,
    engine: undefined,
  };
}

const backends: { name: string; open: () => Promise<{ store: Store; drop?: () => Promise<void> }> }[] = [
  {
    name: "SQLite owned by a server",
    open: async () => ({ store: await openStore(newDatabaseUrl(directory), { owner: true }) }),
  },
  { name: "SQLite", open: async () => ({ store: await openStore(newDatabaseUrl(directory)) }) },
];
if (!("skipped" in probe)) {
  backends.push({
    name: "PostgreSQL",
    async open() {
      const schema = (await createPostgresTestSchema()) as PostgresTestSchema;
      return { store: await openStore(schema.url), drop: schema.drop };
    },
  });
}

for (const backend of backends) {
  describe(`BillingAdmission beyond what a bigint holds, on ${backend.name}`, () => {
    let store: Store;
    let drop: (() => Promise<void>) | undefined;
    const settleErrors: unknown[] = [];
    let admission: BillingAdmission;

    beforeEach(async () => {
      ({ store, drop } = await backend.open());
      settleErrors.length = 0;
      admission = new BillingAdmission({
        store,
        limits: new KeyLimits(new MemoryRateLimiter()),
        replicaId: "test",
        settleRetryDelaysMs: { beforeAnswer: [1], background: [60_000] },
        onSettleError: (error) => settleErrors.push(error),
      });
    });

    afterEach(async () => {
      await admission.close();
      await store.close();
      await drop?.();
    });

    function requestOf(accountId: string, model: CatalogModel) {
      const key: RequestKey = {
        publicId: "keypublic001",
        accountId,
        role: "user",
        allowedModels: undefined,
        rpm: undefined,
        tpm: undefined,
      };
      return { requestId: "req_huge", key, model, user: undefined, setHeader: () => {}, annotate: () => {} };
    }

    it("charges an upstream's absurd prompt count as far as the balance pays, once (regression: a settle retried for ever)", async () => {
      const account = makeAccount({ name: "small", balanceNano: 3_000_000_000n });
      await store.insertAccount(account);
      const model = chatModel("dear", "1.123456789", "2.987654321");
      const ticket = await admission.admit({
        ...requestOf(account.id, model),
        promptTokens: 10,
        maxCompletionTokens: 1,
      });
      await ticket.settle({
        usage: { promptTokens: Number.MAX_SAFE_INTEGER, completionTokens: 1 },
        finishReason: "stop",
        errorCode: undefined,
        timings: { firstPartMs: 1, totalMs: 2 },
      });
      expect(settleErrors).toEqual([]);
      expect(admission.pendingSettlements).toBe(0);
      expect(await store.getAccountMoney(account.id)).toEqual({
        balanceNano: 0n,
        reservedNano: 0n,
        spentNano: 3_000_000_000n,
      });
      const rows = await store.listUsage({ accountId: account.id });
      expect(rows).toMatchObject([
        {
          requestId: "req_huge",
          promptTokens: Number.MAX_SAFE_INTEGER,
          completionTokens: 1,
          costNano: 3_000_000_000n,
        },
      ]);
      expect(await store.audit()).toEqual([]);
    });

    it("refuses a maximum cost beyond what a bigint holds with insufficient_balance, even on a full balance (regression: 500 on PostgreSQL)", async () => {
      const account = makeAccount({ name: "full", balanceNano: MAX_NANO });
      await store.insertAccount(account);
      const model = chatModel("dearest", "9999999.999999999", "9999999.999999999");
      const refused = await admission
        .admit({ ...requestOf(account.id, model), promptTokens: 10, maxCompletionTokens: 1_000_000_000 })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(isAppError(refused) && refused.code).toBe("insufficient_balance");
      expect(await store.getAccountMoney(account.id)).toEqual({
        balanceNano: MAX_NANO,
        reservedNano: 0n,
        spentNano: 0n,
      });
      expect(await store.audit()).toEqual([]);
    });
  });
}

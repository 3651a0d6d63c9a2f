/**
 * A reserve sent to a PostgreSQL that hung, answered 503 `store_unavailable` once the client
 * gave up on it, ran when the database resumed: its reservation belonged to no request and held
 * the account's money until its lease expired and a sweep released it (about 80 s of wrong 403s
 * for an account near its limit). The admission now releases it in the background.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { normalizeError } from "../../src/api/errors.ts";
import { BillingAdmission } from "../../src/billing/reserve-and-settle.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import { openStore } from "../../src/store/open-store.ts";
import { openPostgresStore } from "../../src/store/postgres/open-postgres-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount } from "../store/store-fixtures.ts";
import { pricedModel as model } from "./priced-model.ts";

const postgres: PostgresTestSchema | { skipped: string } = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the unanswered reserve case: ${postgres.skipped}.`);

let proxy: TcpProxy;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  if (!("url" in postgres)) return;
  const direct = new URL(postgres.url);
  proxy = await startTcpProxy({
    targetHost: direct.hostname,
    targetPort: Number(direct.port || 5432),
    mode: "forward",
  });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

afterAll(async () => {
  await proxy?.close();
  if ("url" in postgres) await postgres.drop();
});

describe.skipIf(!("url" in postgres))("a reserve PostgreSQL ran after its client gave up", () => {
  it("is released in the background, the account's money free again", async () => {
    if (!("url" in postgres)) return;
    const proxied = new URL(postgres.url);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(proxy.port);
    // The client gives up on a statement after a second and a half (the server's own timeout,
    // half a second, never runs while it hangs).
    const replicaStore = await openPostgresStore(proxied.toString(), { queryTimeoutMilliseconds: 500 });
    cleanups.push(() => replicaStore.close());
    const store: Store = await openStore(postgres.url);
    cleanups.push(() => store.close());
    const account = makeAccount({ name: "near-its-limit", balanceNano: 40_000n });
    await store.insertAccount(account);
    const admission = new BillingAdmission({
      store: replicaStore,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "replica-a",
      // The release waits a second: by then the statement the database took on resuming ran.
      settleRetryDelaysMs: { beforeAnswer: [], background: [1_000, 100] },
    });
    cleanups.push(() => admission.close());
    const key: RequestKey = {
      publicId: "keypublic001",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
    };

    proxy.setMode("pause");
    const refused = await admission
      .admit({
        requestId: "refused-while-hung",
        key,
        model,
        user: undefined,
        setHeader: () => {},
        annotate: () => {},
        promptTokens: 10,
        maxCompletionTokens: 20,
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(normalizeError(refused).code).toBe("store_unavailable");
    // The database resumes and runs the reserve it held: 30,000 of the account's 40,000 set aside.
    proxy.setMode("forward");

    // Released: no reservation left, the whole balance available, and the request's usage row
    // says it cost nothing.
    while ((await store.listReservations()).length > 0 || (await store.listUsage()).length === 0) {
      await sleep(20);
    }
    expect(await store.getAccountMoney(account.id)).toMatchObject({ balanceNano: 40_000n, reservedNano: 0n });
    expect((await store.listUsage()).map((row) => [row.requestId, row.costNano, row.errorCode])).toEqual([
      ["refused-while-hung", 0n, "store_unavailable"],
    ]);
    expect(await store.audit()).toEqual([]);
  }, 15_000);
});

import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { normalizeError } from "../../src/api/errors.ts";
import { openPostgresStore } from "../../src/store/postgres/open-postgres-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy } from "../cluster/tcp-proxy.ts";
import {
  countBackendsWaitingForLocks,
  lockAccounts,
  terminateBackends,
  withApplicationName,
} from "./postgres-backends.ts";
import {
  createDroppedSchema,
  createPostgresTestSchema,
  type PostgresTestSchema,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { makeAccount, makeReservation, makeSettlement } from "./store-fixtures.ts";

/**
 * The PostgreSQL store when the database goes away: connections terminated under load (a
 * restart, a failover, `pg_terminate_backend`), and a database that stops answering (a network
 * partition). Each test works in a schema of its own and touches only its own store's backends,
 * found by an `application_name` of its own.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL outage tests: ${probe.skipped}.`);
else await probe.drop();

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function newSchema(): Promise<PostgresTestSchema> {
  return createDroppedSchema(cleanups);
}

/** What the API would answer for a failed store operation. */
function apiCodeOf(error: unknown): string {
  return normalizeError(error).code;
}

/** Settles `promise` into its value or the API error code of its failure. */
function outcomeOf<T>(promise: Promise<T>): Promise<{ value: T } | { code: string }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ code: apiCodeOf(error) }),
  );
}

const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

describeWithPostgres("the PostgreSQL store when its connections are terminated", () => {
  it("keeps the process alive, fails what was running with store_unavailable, and answers again afterwards", async () => {
    const schema = await newSchema();
    const applicationName = `${schema.schema}_terminated`;
    const store = await openPostgresStore(withApplicationName(schema.url, applicationName));
    cleanups.push(() => store.close());
    const [alone, batched, busy] = [
      makeAccount({ name: "alone", balanceNano: 1_000n }),
      makeAccount({ name: "batched", balanceNano: 1_000n }),
      makeAccount({ name: "busy", balanceNano: 10n ** 15n }),
    ];
    for (const account of [alone, batched, busy]) await store.insertAccount(account);
    const open = makeReservation({ accountId: batched.id, amountNano: 10n });
    expect(await store.reserve(open)).toBe("reserved");

    // Load on another account while the connections go: whatever it has in flight then fails.
    let loading = true;
    cleanups.push(async () => {
      loading = false;
    });
    const loadCodes = new Set<string>();
    const load = Array.from({ length: 4 }, async () => {
      while (loading) {
        const reservation = makeReservation({ accountId: busy.id, amountNano: 3n });
        try {
          if ((await store.reserve(reservation)) === "reserved") {
            await store.settle(makeSettlement(reservation, 2n));
          }
        } catch (error) {
          loadCodes.add(apiCodeOf(error));
        }
      }
    });

    // Statements that wait, their connections checked out, for rows the test holds: a reserve
    // alone, a batch of reserves, a settle, and a credit (a transaction of two statements).
    const release = await lockAccounts(schema, [alone.id, batched.id]);
    cleanups.push(release);
    const waiting = [
      outcomeOf(store.reserve(makeReservation({ accountId: alone.id, amountNano: 1n }))),
      ...[1n, 2n, 3n].map((amountNano) =>
        outcomeOf(store.reserve(makeReservation({ accountId: batched.id, amountNano }))),
      ),
      outcomeOf(store.settle(makeSettlement(open, 5n))),
      outcomeOf(
        store.credit({
          id: randomUUID(),
          accountId: alone.id,
          amountNano: 5n,
          note: "",
          createdAt: new Date(),
        }),
      ),
    ];
    await expect.poll(() => countBackendsWaitingForLocks(applicationName), { timeout: 10_000 }).toBe(4);

    expect(await terminateBackends(applicationName)).toBeGreaterThanOrEqual(4);
    await release();
    expect(await Promise.all(waiting)).toEqual(
      Array.from({ length: 6 }, () => ({ code: "store_unavailable" })),
    );
    loading = false;
    await Promise.all(load);
    expect([...loadCodes].filter((code) => code !== "store_unavailable")).toEqual([]);

    // The pool opened new connections by itself.
    expect(await store.reserve(makeReservation({ accountId: alone.id, amountNano: 1n }))).toBe("reserved");
    expect(await store.settle(makeSettlement(open, 5n))).toBe(5n);
    expect(await store.getAccountMoney(batched.id)).toEqual({
      balanceNano: 995n,
      reservedNano: 0n,
      spentNano: 5n,
    });
    expect((await store.audit()).filter((problem) => problem.kind !== "open_reservation")).toEqual([]);
  });
});

describeWithPostgres("the PostgreSQL store when the database stops answering", () => {
  /** The client's timeout: the store's query timeout plus its margin of a second. */
  const QUERY_TIMEOUT_MS = 500;
  const CLIENT_TIMEOUT_MS = QUERY_TIMEOUT_MS + 1_000;

  it("fails each waiting reserve and settle after about one timeout, not one timeout per operation", async () => {
    const schema = await newSchema();
    // Paused: connections are accepted, and what the store sends waits (a network partition).
    const target = new URL(testPostgresUrl());
    const proxy = await startTcpProxy({
      targetHost: target.hostname,
      targetPort: Number(target.port || 5432),
      mode: "forward",
    });
    cleanups.push(() => proxy.close());
    const url = new URL(schema.url);
    url.host = `127.0.0.1:${proxy.port}`;
    const store: Store = await openPostgresStore(url.toString(), {
      queryTimeoutMilliseconds: QUERY_TIMEOUT_MS,
      connectionTimeoutMilliseconds: CLIENT_TIMEOUT_MS,
    });
    cleanups.push(() => store.close());
    const [first, second, third] = [
      makeAccount({ name: "first", balanceNano: 1_000n }),
      makeAccount({ name: "second", balanceNano: 1_000n }),
      makeAccount({ name: "third", balanceNano: 1_000n }),
    ];
    for (const account of [first, second, third]) await store.insertAccount(account);
    const open = [1, 2, 3].map(() => makeReservation({ accountId: third.id, amountNano: 10n }));
    for (const reservation of open) expect(await store.reserve(reservation)).toBe("reserved");

    proxy.setMode("pause");
    const started = performance.now();
    const failedAt: number[] = [];
    const timed = <T>(promise: Promise<T>) =>
      outcomeOf(promise).then((outcome) => {
        failedAt.push(performance.now() - started);
        return outcome;
      });
    const reserve = (accountId: string) =>
      timed(store.reserve(makeReservation({ accountId, amountNano: 1n })));
    // One reserve alone, then three that queue behind it (they arrive a turn later); a batch of
    // three reserves of another account; a batch of three settles.
    const outcomes: Promise<{ value: unknown } | { code: string }>[] = [reserve(first.id)];
    await new Promise((resolve) => setImmediate(resolve));
    outcomes.push(
      ...[first, first, first, second, second, second].map((account) => reserve(account.id)),
      ...open.map((reservation) => timed(store.settle(makeSettlement(reservation, 5n)))),
    );
    expect(await Promise.all(outcomes)).toEqual(
      Array.from({ length: 10 }, () => ({ code: "store_unavailable" })),
    );
    // Each failed after one timeout: within a timeout of each other (one at a time, the last of
    // the first account's would have come four timeouts after the first).
    expect(Math.max(...failedAt) - Math.min(...failedAt)).toBeLessThan(CLIENT_TIMEOUT_MS);

    proxy.setMode("forward");
    expect(await store.reserve(makeReservation({ accountId: first.id, amountNano: 1n }))).toBe("reserved");
  });
});

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeAccount, makeReservation, makeSettlement, makeUsage } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

describe("SQLite group commit of reserve and settle", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory));
  });
  afterEach(async () => {
    await store.close();
  });

  it("commits operations asked for in the same turn together, each with its own outcome", async () => {
    const account = makeAccount({ name: "batch", balanceNano: 1_000n });
    await store.insertAccount(account);
    const first = makeReservation({ accountId: account.id, amountNano: 600n });
    const second = makeReservation({ accountId: account.id, amountNano: 600n });
    const unknown = makeReservation({ accountId: "no-such-account", amountNano: 1n });
    // Asked for in one turn: one batch, run in order.
    const results = await Promise.all([store.reserve(first), store.reserve(second), store.reserve(unknown)]);
    expect(results).toEqual(["reserved", "insufficient_balance", "account_not_found"]);
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 1_000n,
      reservedNano: 600n,
      spentNano: 0n,
    });
  });

  it("rolls back only the operation that failed (regression guard for batching)", async () => {
    const account = makeAccount({ name: "partial", balanceNano: 1_000n });
    await store.insertAccount(account);
    const existing = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await store.reserve(existing)).toBe("reserved");

    const fresh = makeReservation({ accountId: account.id, amountNano: 200n });
    const duplicate = { ...existing, amountNano: 300n };
    const orphan = makeUsage({ accountId: "no-such-account", costNano: 5n });
    const outcomes = await Promise.allSettled([
      store.reserve(fresh),
      store.reserve(duplicate),
      store.settle(orphan),
      store.settle(makeSettlement(existing, 40n)),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      "fulfilled",
      "rejected",
      "rejected",
      "fulfilled",
    ]);
    // The duplicate's conditional update was undone with it; the orphan wrote no usage row.
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 960n,
      reservedNano: 200n,
      spentNano: 40n,
    });
    expect((await store.listUsage()).map((row) => row.id)).toEqual([existing.id]);
    expect((await store.listReservations()).map((row) => row.id)).toEqual([fresh.id]);
  });

  it("answers only after the commit: a settled row is there for the next reader", async () => {
    const account = makeAccount({ name: "visible", balanceNano: 1_000n });
    await store.insertAccount(account);
    const reservations = Array.from({ length: 20 }, () =>
      makeReservation({ accountId: account.id, amountNano: 10n }),
    );
    await Promise.all(reservations.map((reservation) => store.reserve(reservation)));
    await Promise.all(reservations.map((reservation) => store.settle(makeSettlement(reservation, 3n))));
    expect(await store.audit()).toEqual([]);
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 940n,
      reservedNano: 0n,
      spentNano: 60n,
    });
  });

  it("finishes pending operations before it closes", async () => {
    const account = makeAccount({ name: "closing", balanceNano: 1_000n });
    await store.insertAccount(account);
    const pending = store.reserve(makeReservation({ accountId: account.id, amountNano: 10n }));
    const closing = store.close();
    expect(await pending).toBe("reserved");
    await closing;
    store = await openStore(newDatabaseUrl(directory));
  });
});

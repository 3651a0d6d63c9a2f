import { randomUUID } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { HOLD_MS } from "../../src/store/sqlite/sqlite-held-reservations.ts";
import type { Store } from "../../src/store/store.ts";
import { until } from "../support/until.ts";
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

  it("lists a page once the rows stamped before it have committed, so that a poller following the cursor misses none (regression: a row of the same millisecond with a smaller id committed behind it)", async () => {
    const account = makeAccount({ name: "poller", balanceNano: 1_000n });
    await store.insertAccount(account);
    const stamp = new Date("2026-01-01T00:00:00.123Z");
    const later = makeReservation({ accountId: account.id, id: "ffffffff-0000-7000-8000-000000000000" });
    const earlier = makeReservation({ accountId: account.id, id: "00000000-0000-7000-8000-000000000000" });
    for (const reservation of [later, earlier]) await store.reserve(reservation);
    await store.settle(makeSettlement(later, 1n, { createdAt: stamp }));
    // Stamped in the same millisecond and queued as the page is asked for: its batch commits
    // after the page's query would have read.
    const settling = store.settle(makeSettlement(earlier, 1n, { createdAt: stamp }));
    const seen: string[] = [];
    let after: { createdAt: Date; id: string } | undefined;
    for (;;) {
      const page = await store.listUsage({}, { limit: 1, after });
      if (page.length === 0) break;
      seen.push(...page.map((row) => row.id));
      const last = page.at(-1) as { createdAt: Date; id: string };
      after = { createdAt: last.createdAt, id: last.id };
    }
    await settling;
    expect(seen).toEqual([earlier.id, later.id]);
  });

  it("lists a page only up to the millisecond it is asked in, which rows stamped later may still join", async () => {
    const account = makeAccount({ name: "this-millisecond", balanceNano: 1_000n });
    await store.insertAccount(account);
    const now = new Date("2026-01-01T00:00:00.500Z");
    vi.useFakeTimers({ toFake: ["Date"], now });
    try {
      const reservation = makeReservation({ accountId: account.id });
      await store.reserve(reservation);
      await store.settle(makeSettlement(reservation, 1n, { createdAt: now }));
      expect(await store.listUsage({}, { limit: 10 })).toEqual([]);
      // Unpaged listings (the CLI's export, a sum) have no cursor to be passed by.
      expect(await store.listUsage()).toHaveLength(1);
      vi.setSystemTime(now.getTime() + 1);
      expect((await store.listUsage({}, { limit: 10 })).map((row) => row.id)).toEqual([reservation.id]);
    } finally {
      vi.useRealTimers();
    }
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

/** What the file itself says, read over a connection of its own (as the CLI beside a server would). */
function readFile(url: string): { reservations: number; reservedNano: bigint[]; usage: number } {
  const file = new DatabaseSync(url.slice("sqlite:".length), { readOnly: true, readBigInts: true });
  try {
    const count = (table: string) =>
      Number((file.prepare(`select count(*) as n from ${table}`).get() as { n: bigint }).n);
    return {
      reservations: count("reservations"),
      reservedNano: file
        .prepare("select reserved_nano from accounts order by id")
        .all()
        .map((row) => row.reserved_nano as bigint),
      usage: count("usage"),
    };
  } finally {
    file.close();
  }
}

/** Changes the file from a connection of its own, as another process would. */
function writeFile(url: string, statement: string): void {
  const file = new DatabaseSync(url.slice("sqlite:".length));
  try {
    file.exec(statement);
  } finally {
    file.close();
  }
}

describe("SQLite reservations held in memory by the server that owns the file", () => {
  let url: string;
  let owner: Store;
  beforeEach(async () => {
    url = newDatabaseUrl(directory);
    owner = await openStore(url, { owner: true });
  });
  afterEach(async () => {
    await owner.close();
  });

  it("settles a short request without ever writing its reservation row", async () => {
    const account = makeAccount({ name: "short", balanceNano: 1_000n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 600n });
    expect(await owner.reserve(reservation)).toBe("reserved");
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 0 });
    // Held money still counts: the rest of the balance does not cover a second one.
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 600n }))).toBe(
      "insufficient_balance",
    );
    await owner.settle(makeSettlement(reservation, 250n));
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 1 });
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 750n,
      reservedNano: 0n,
      spentNano: 250n,
    });
    expect(await owner.audit()).toEqual([]);
  });

  it("writes a reservation that lasts, so other processes see the money set aside", async () => {
    const account = makeAccount({ name: "long", balanceNano: 1_000n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 600n });
    const heldAt = performance.now();
    expect(await owner.reserve(reservation)).toBe("reserved");
    await until(() => readFile(url).reservations === 1);
    expect(performance.now() - heldAt).toBeGreaterThanOrEqual(HOLD_MS - 1);
    expect(readFile(url).reservedNano).toEqual([600n]);
    // Written once, and counted once.
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 1_000n,
      reservedNano: 600n,
      spentNano: 0n,
    });
    await owner.settle(makeSettlement(reservation, 100n));
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 1 });
    expect(await owner.audit()).toEqual([]);
  });

  it("shares what it holds with a plain store on the same connection, which cannot overspend it", async () => {
    const plain = await openStore(url);
    try {
      const account = makeAccount({ name: "shared", balanceNano: 100n });
      await owner.insertAccount(account);
      expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 70n }))).toBe(
        "reserved",
      );
      expect(await plain.reserve(makeReservation({ accountId: account.id, amountNano: 40n }))).toBe(
        "insufficient_balance",
      );
      expect(await plain.reserve(makeReservation({ accountId: account.id, amountNano: 30n }))).toBe(
        "reserved",
      );
      expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe(
        "insufficient_balance",
      );
      expect(readFile(url).reservedNano).toEqual([30n]);
    } finally {
      await plain.close();
    }
  });

  it("refuses a reservation whose id is taken, held or written", async () => {
    const account = makeAccount({ name: "twice", balanceNano: 100n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
    await owner.reserve(reservation);
    await expect(owner.reserve(reservation)).rejects.toThrow(/exists/);
    // Reading the reservations writes the held row: from then on the file knows the id.
    expect(await owner.listReservations()).toEqual([reservation]);
    await expect(owner.reserve({ ...reservation, amountNano: 1n })).rejects.toThrow(/exists/);
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 100n,
      reservedNano: 10n,
      spentNano: 0n,
    });
  });

  it("keeps a reservation whose row cannot be written in memory, and lets go of it when settled", async () => {
    const account = makeAccount({ name: "stuck", balanceNano: 100n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
    await owner.reserve(reservation);
    // Another writer takes the id in the file (amount 0, so the reserved column stays right):
    // writing the held row now fails on its primary key.
    const file = new DatabaseSync(url.slice("sqlite:".length));
    file
      .prepare(
        "insert into reservations (id, request_id, account_id, key_public_id, model, amount_nano, replica_id, lease_expires_at, created_at) values (?, 'r', ?, 'k', 'm', 0, 'other', '2030-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')",
      )
      .run(reservation.id, account.id);
    file.close();
    // The write and the settle queue together: the settle goes through the file's row.
    await Promise.all([owner.listReservations(), owner.settle(makeSettlement(reservation, 10n))]);
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 90n,
      reservedNano: 0n,
      spentNano: 10n,
    });
    // Nothing is held any more: the whole balance can be reserved again.
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 90n }))).toBe("reserved");
  });

  it("writes what it holds when it closes, for the next start to release", async () => {
    const account = makeAccount({ name: "closing", balanceNano: 100n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
    await owner.reserve(reservation);
    await owner.close();
    expect(readFile(url)).toEqual({ reservations: 1, reservedNano: [10n], usage: 0 });
    owner = await openStore(url, { owner: true });
    expect(await owner.listReservations()).toEqual([reservation]);
  });

  it("holds what its known money covers without reading the file, and reads it for the rest", async () => {
    const account = makeAccount({ name: "known", balanceNano: 1_000n });
    await owner.insertAccount(account);
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 100n }))).toBe(
      "reserved",
    );
    // Behind the owner's back the balance drops to 300 (nothing but the owner may do this; it
    // shows which reservations read the file). 300 more are covered by what the owner knows
    // (1,000 less the 100 it holds): held without a read.
    writeFile(url, `update accounts set balance_nano = 300 where id = '${account.id}'`);
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 300n }))).toBe(
      "reserved",
    );
    // 700 more are not covered by 1,000 - 400: the file decides, and it has 300 - 400.
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 700n }))).toBe(
      "insufficient_balance",
    );
    // A credit from another process is seen as soon as a reservation needs it.
    writeFile(url, `update accounts set balance_nano = 5000 where id = '${account.id}'`);
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 4_600n }))).toBe(
      "reserved",
    );
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe(
      "insufficient_balance",
    );
  });

  it("counts its own charges and written rows in what it knows, and never overspends", async () => {
    const account = makeAccount({ name: "charged", balanceNano: 100n });
    await owner.insertAccount(account);
    const first = makeReservation({ accountId: account.id, amountNano: 60n });
    expect(await owner.reserve(first)).toBe("reserved");
    await owner.settle(makeSettlement(first, 50n));
    // 50 left: known without a read, which must have counted the charge.
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 51n }))).toBe(
      "insufficient_balance",
    );
    const second = makeReservation({ accountId: account.id, amountNano: 30n });
    expect(await owner.reserve(second)).toBe("reserved");
    // Its row is written (reserved 30 in the file, no longer held): still 20 available.
    expect(await owner.listReservations()).toEqual([second]);
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 21n }))).toBe(
      "insufficient_balance",
    );
    // Settled through its row: the 30 come back, 10 are charged.
    await owner.settle(makeSettlement(second, 10n));
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 41n }))).toBe(
      "insufficient_balance",
    );
    expect(await owner.reserve(makeReservation({ accountId: account.id, amountNano: 40n }))).toBe("reserved");
    expect(readFile(url).reservedNano).toEqual([0n]);
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 40n,
      reservedNano: 40n,
      spentNano: 60n,
    });
  });

  it("tells an account's money with what it holds, without writing it", async () => {
    const account = makeAccount({ name: "told", balanceNano: 100n });
    await owner.insertAccount(account);
    await owner.reserve(makeReservation({ accountId: account.id, amountNano: 70n }));
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 100n,
      reservedNano: 70n,
      spentNano: 0n,
    });
    expect(await owner.getAccountBalance(account.id)).toEqual({ balanceNano: 100n, reservedNano: 70n });
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 0 });
    expect(await owner.getAccountMoney("no-such-account")).toBeUndefined();
  });

  it("answers a credit with the account's money as the reads tell it, what it holds included", async () => {
    const account = makeAccount({ name: "credited", balanceNano: 100n });
    await owner.insertAccount(account);
    await owner.reserve(makeReservation({ accountId: account.id, amountNano: 70n }));
    const credit = {
      id: randomUUID(),
      accountId: account.id,
      amountNano: 50n,
      note: undefined,
      createdAt: new Date(),
    };
    const money = { balanceNano: 150n, reservedNano: 70n, spentNano: 0n };
    expect(await owner.credit(credit)).toEqual({ outcome: "credited", money });
    expect(await owner.credit(credit)).toEqual({ outcome: "already_credited", money });
    expect(await owner.getAccountMoney(account.id)).toEqual(money);
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 0 });
  });

  it("takes an id again once a release deleted its row", async () => {
    const account = makeAccount({ name: "released", balanceNano: 100n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
    await owner.reserve(reservation);
    expect(await owner.listReservations()).toEqual([reservation]);
    expect(await owner.releaseReservations({ replicaId: "*" })).toBe(1);
    expect(await owner.reserve(reservation)).toBe("reserved");
  });

  it("settles a reservation whose row is being written through that row, once", async () => {
    const account = makeAccount({ name: "racing", balanceNano: 100n });
    await owner.insertAccount(account);
    const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
    await owner.reserve(reservation);
    // listReservations starts writing the held row; the settles queued behind it (in the same
    // batch) delete that row and charge once, before the listing reads.
    const [listed] = await Promise.all([
      owner.listReservations(),
      owner.settle(makeSettlement(reservation, 4n)),
      owner.settle(makeSettlement(reservation, 4n)),
    ]);
    expect(listed).toEqual([]);
    expect(readFile(url)).toEqual({ reservations: 0, reservedNano: [0n], usage: 1 });
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 96n,
      reservedNano: 0n,
      spentNano: 4n,
    });
  });
});

/**
 * A SQLite file the server cannot write (its disk full, an I/O error, made read-only): like a
 * file locked by another process, a failed settle stops the holding of reservations in memory,
 * so new requests are refused with 503 `store_unavailable` instead of served without their
 * charges being recorded. Regression: on a full disk the server answered 200 to every request
 * and wrote none of their usage rows (334 of 500 in an explorer's run; lost for good on a crash).
 * `PRAGMA query_only` makes every write fail with SQLITE_READONLY, as a disk remounted read-only
 * after I/O errors does.
 */
import { DatabaseSync } from "node:sqlite";
import { Kysely, SqliteDialect } from "kysely";
import { afterEach, describe, expect, it } from "vitest";
import { normalizeError } from "../../src/api/errors.ts";
import type { Database } from "../../src/store/database.ts";
import { createKyselyStore } from "../../src/store/kysely-store.ts";
import { migrateToLatest } from "../../src/store/migrate-to-latest.ts";
import { explainSqliteError, isSqliteUnavailable } from "../../src/store/sqlite/explain-sqlite-error.ts";
import {
  type NodeSqliteDatabase,
  openNodeSqliteDatabase,
} from "../../src/store/sqlite/node-sqlite-database.ts";
import { createSqliteBillingBatch } from "../../src/store/sqlite/sqlite-billing-batch.ts";
import { rejection } from "../support/rejection.ts";
import { makeAccount, makeReservation, makeSettlement } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();
const opened: NodeSqliteDatabase[] = [];

afterEach(() => {
  for (const database of opened.splice(0)) database.close();
});

async function openFile() {
  const database = openNodeSqliteDatabase(newDatabaseUrl(directory).slice("sqlite:".length));
  opened.push(database);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  await migrateToLatest(db);
  const setWritable = (writable: boolean) =>
    database.prepareDirect(`PRAGMA query_only = ${writable ? 0 : 1}`).run();
  return {
    database,
    db,
    store: createKyselyStore(db),
    billing: createSqliteBillingBatch({ db, database }),
    setWritable,
  };
}

describe("the server's SQLite billing while its file cannot be written", () => {
  it("refuses reservations after a settle failed, until a write succeeds, losing no charge", async () => {
    const { store, billing, setWritable } = await openFile();
    const account = makeAccount({ name: "acme", balanceNano: 1_000n });
    await store.insertAccount(account);
    const served = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await billing.reserve(served, { hold: true })).toBe("reserved");

    setWritable(false);
    const settleError = await rejection(billing.settle(makeSettlement(served, 30n)));
    expect(isSqliteUnavailable(settleError)).toBe(true);
    // Its charge cannot be written: a new request is refused, not held in memory and served.
    const refused = await rejection(
      billing.reserve(makeReservation({ accountId: account.id, amountNano: 100n }), { hold: true }),
    );
    expect(normalizeError(refused)).toMatchObject({ code: "store_unavailable", status: 503 });
    expect(billing.heldFor(account.id)).toBe(100n);

    setWritable(true);
    const next = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await billing.reserve(next, { hold: true })).toBe("reserved");
    // The settle retried once the file can be written charges once.
    expect(await billing.settle(makeSettlement(served, 30n))).toBe(30n);
    expect(await billing.settle(makeSettlement(served, 30n))).toBe(30n);
    expect(await billing.settle(makeSettlement(next, 20n))).toBe(20n);
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 950n,
      reservedNano: 0n,
      spentNano: 50n,
    });
    // Held again once writes succeed.
    expect(
      await billing.reserve(makeReservation({ accountId: account.id, amountNano: 1n }), { hold: true }),
    ).toBe("reserved");
    expect(billing.heldFor(account.id)).toBe(1n);
    await billing.close();
  });

  it("is not opened again by a batch that wrote nothing (a refusal commits on a full disk too)", async () => {
    const { database, store, billing } = await openFile();
    const rich = makeAccount({ name: "rich", balanceNano: 1_000_000n });
    const broke = makeAccount({ name: "broke", balanceNano: 0n });
    await store.insertAccount(rich);
    await store.insertAccount(broke);
    // A full disk: no page more than the file has (and two), every page packed.
    database.prepareDirect("create table filler (x blob)").run();
    const pages = Number(
      (database.prepareDirect("PRAGMA page_count").get() as { page_count: number }).page_count,
    );
    database.prepareDirect(`PRAGMA max_page_count = ${pages + 2}`).run();
    const fill = database.prepareDirect("insert into filler values (randomblob(?))");
    for (const size of [4000, 1000, 200, 40, 8, 1]) {
      try {
        for (;;) fill.run(size);
      } catch {
        // Full for rows of this size: smaller ones may fit still.
      }
    }
    // Written reservations (as beside another process) until one fails for want of space.
    let failed: unknown;
    for (let index = 0; index < 5_000 && failed === undefined; index++) {
      await billing
        .reserve(makeReservation({ accountId: rich.id, amountNano: 1n }), { hold: false })
        .catch((error: unknown) => {
          failed = error;
        });
    }
    expect(isSqliteUnavailable(failed)).toBe(true);
    expect(
      await billing.reserve(makeReservation({ accountId: broke.id, amountNano: 100n }), { hold: true }),
    ).toBe("insufficient_balance");
    const refused = await rejection(
      billing.reserve(makeReservation({ accountId: rich.id, amountNano: 100n }), { hold: true }),
    );
    expect(normalizeError(refused).code).toBe("store_unavailable");
    expect(billing.heldFor(rich.id)).toBe(0n);
  });

  it("lets the error that ended a transaction through, when SQLite had rolled it back itself", async () => {
    const { database, db } = await openFile();
    const diskFull = new Error("database or disk is full");
    const thrown = await rejection(
      db.transaction().execute(async (transaction) => {
        await transaction.selectFrom("accounts").select("id").execute();
        // What SQLite does after some errors (disk full, I/O) before kysely's own rollback.
        database.prepareDirect("rollback").run();
        throw diskFull;
      }),
    );
    expect(thrown).toBe(diskFull);
    expect(database.inTransaction).toBe(false);
  });

  it("explains a full disk, naming the file, and counts it as the store unavailable", () => {
    const file = newDatabaseUrl(directory).slice("sqlite:".length);
    const database = new DatabaseSync(file);
    database.exec("create table notes (body text)");
    // No page more than the file has: the next that needs one fails as a full disk does.
    database.exec("PRAGMA max_page_count = 2");
    let full: unknown;
    try {
      database.prepare("insert into notes values (?)").run("x".repeat(10_000));
    } catch (error) {
      full = error;
    } finally {
      database.close();
    }
    const explained = explainSqliteError(full, file, 0) as Error;
    expect(explained.message).toMatch(new RegExp(`Cannot write the database ${file}: its disk is full`));
    expect(isSqliteUnavailable(explained)).toBe(true);
    expect(normalizeError(explained)).toMatchObject({ code: "store_unavailable", status: 503 });
  });
});

import { Client } from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { openStoreInWorker, type StoreClient } from "./open-store-in-worker.ts";
import {
  createPostgresTestSchema,
  type PostgresTestSchema,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { describeStoreConformance, type SharedDatabase } from "./store-conformance.ts";
import { makeAccount, makeReservation, makeSettlement } from "./store-fixtures.ts";

// Top-level await: whether PostgreSQL is there decides which suites this file declares.
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL store tests: ${probe.skipped}.`);

/** Schemas made by the running test, dropped after it (after the suite's own hooks closed its stores). */
let testSchemas: PostgresTestSchema[] = [];

afterEach(async () => {
  const dropping = testSchemas;
  testSchemas = [];
  await Promise.all(dropping.map((schema) => schema.drop()));
});

afterAll(async () => {
  if (!("skipped" in probe)) await probe.drop();
});

/** A new schema in the test database, dropped after the test. */
async function newSchema(): Promise<PostgresTestSchema> {
  const created = await createPostgresTestSchema();
  if ("skipped" in created) throw new Error(created.skipped);
  testSchemas.push(created);
  return created;
}

/** How many connections the server has open under `applicationName`. */
async function countConnections(schema: PostgresTestSchema, applicationName: string): Promise<number> {
  const [row] = await query<{ connections: string }>(
    schema,
    "select count(*) as connections from pg_stat_activity where application_name = $1",
    [applicationName],
  );
  return Number(row?.connections);
}

/** Runs statements on the schema through a connection of the test's own. */
async function query<Row extends Record<string, unknown>>(
  schema: PostgresTestSchema,
  statement: string,
  values: unknown[] = [],
): Promise<Row[]> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  try {
    await client.query(`set search_path to ${schema.schema}`);
    return (await client.query<Row>(statement, values)).rows;
  } finally {
    await client.end();
  }
}

const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

/**
 * The run's schema, emptied: the conformance suite opens a fresh store for each of its tests, and
 * emptying the tables costs less than creating and migrating a schema each time. (The suite closes
 * every store and client of a test before the next one starts.)
 */
async function openEmptiedRunStore(): Promise<Store> {
  const schema = runSchema();
  const store = await openStore(schema.url);
  await query(schema, "truncate accounts, api_keys, credits, reservations, usage");
  return store;
}

async function openSharedRunDatabase(): Promise<SharedDatabase> {
  const schema = runSchema();
  const store = await openEmptiedRunStore();
  return {
    store,
    openClient: () => openStore(schema.url),
    async runSql(statement) {
      await query(schema, statement);
    },
    close: () => store.close(),
  };
}

function runSchema(): PostgresTestSchema {
  if ("skipped" in probe) throw new Error(probe.skipped);
  return probe;
}

describeWithPostgres("PostgreSQL", () => {
  describeStoreConformance("PostgreSQL", {
    openFreshStore: openEmptiedRunStore,
    openSharedDatabase: openSharedRunDatabase,
  });

  describe("openStore with postgres://", () => {
    it("creates the schema named by ?schema= and keeps every table in it", async () => {
      const schema = await newSchema();
      await query(schema, `drop schema ${schema.schema}`);
      const store = await openStore(schema.url);
      await store.close();
      const tables = await query<{ table_name: string }>(
        schema,
        "select table_name from information_schema.tables where table_schema = $1 order by table_name",
        [schema.schema],
      );
      expect(tables.map((row) => row.table_name)).toEqual([
        "accounts",
        "api_keys",
        "credits",
        "kysely_migration",
        "kysely_migration_lock",
        "reservations",
        "usage",
      ]);
    });

    it("fails a statement the database does not answer in time instead of waiting for ever", async () => {
      const schema = await newSchema();
      const { openPostgresStore } = await import("../../src/store/postgres/open-postgres-store.ts");
      const store = await openPostgresStore(schema.url, { queryTimeoutMilliseconds: 300 });
      const holder = new Client({ connectionString: testPostgresUrl() });
      await holder.connect();
      try {
        // Another session holds the accounts table: every read of it waits for that session.
        await holder.query("begin");
        await holder.query(`lock table ${schema.schema}.accounts in access exclusive mode`);
        await expect(store.getAccountByName("acme")).rejects.toThrow(/timeout/i);
        await holder.query("rollback");
        // The connection that gave up is usable again.
        expect(await store.getAccountByName("acme")).toBeUndefined();
      } finally {
        await holder.end();
        await store.close();
      }
    });

    it("keeps the data across reopening and runs each migration once", async () => {
      const schema = await newSchema();
      const first = await openStore(schema.url);
      const account = makeAccount({ name: "acme", balanceNano: 5n });
      await first.insertAccount(account);
      await first.close();
      const second = await openStore(schema.url);
      try {
        expect(await second.getAccountByName("acme")).toEqual(account);
      } finally {
        await second.close();
      }
      const applied = await query<{ name: string }>(
        schema,
        "select name from kysely_migration order by name",
      );
      expect(applied.map((row) => row.name)).toEqual([
        "001_accounts_and_keys",
        "002_billing",
        "003_usage_by_time",
        "004_account_spent",
        "005_accounts_by_creation",
        "006_keys_by_creation",
      ]);
    });

    it("migrates a new schema once when several replicas start at the same time", async () => {
      const schema = await newSchema();
      await query(schema, `drop schema ${schema.schema}`);
      const stores = await Promise.all(Array.from({ length: 6 }, () => openStore(schema.url)));
      const workers = await Promise.all([1, 2].map(() => openStoreInWorker(schema.url)));
      await Promise.all([
        ...stores.map((store) => store.close()),
        ...workers.map((worker) => worker.close()),
      ]);
      const applied = await query<{ name: string }>(
        schema,
        "select name from kysely_migration order by name",
      );
      expect(applied.map((row) => row.name)).toEqual([
        "001_accounts_and_keys",
        "002_billing",
        "003_usage_by_time",
        "004_account_spent",
        "005_accounts_by_creation",
        "006_keys_by_creation",
      ]);
    });

    it("migrates while other sessions drop schemas (regression: kysely's introspection failed with 3F000)", async () => {
      const churn = await newSchema();
      let churning = true;
      const client = new Client({ connectionString: testPostgresUrl() });
      await client.connect();
      const loop = (async () => {
        for (let round = 0; churning; round++) {
          const name = `${churn.schema}_${round}`;
          await client.query(`create schema ${name}`);
          await client.query(`create table ${name}.items (id bigint primary key, label text)`);
          await client.query(`drop schema ${name} cascade`);
        }
      })();
      try {
        for (let attempt = 0; attempt < 8; attempt++) {
          const store = await openStore((await newSchema()).url);
          await store.close();
        }
      } finally {
        churning = false;
        await loop;
        await client.end();
      }
    });

    it("accepts a search_path given in options= instead of ?schema=", async () => {
      const schema = await newSchema();
      const url = new URL(testPostgresUrl());
      url.searchParams.set("options", `-c search_path=${schema.schema}`);
      const store = await openStore(url.toString());
      try {
        await store.insertAccount(makeAccount({ name: "acme" }));
      } finally {
        await store.close();
      }
      expect(await query(schema, "select name from accounts")).toEqual([{ name: "acme" }]);
    });

    it("refuses a search_path that names no existing schema", async () => {
      const url = new URL(testPostgresUrl());
      url.searchParams.set("options", "-c search_path=tollgate_test_no_such_schema");
      await expect(openStore(url.toString())).rejects.toThrow(/search_path names no schema that exists/);
    });

    it("opens at most 10 connections per store", async () => {
      const schema = await newSchema();
      const applicationName = `${schema.schema}_pool`;
      const url = new URL(schema.url);
      url.searchParams.set("application_name", applicationName);
      const store = await openStore(url.toString());
      try {
        const account = makeAccount({ name: "acme", balanceNano: 1_000n });
        await store.insertAccount(account);
        await Promise.all(
          Array.from({ length: 60 }, () =>
            store.reserve(makeReservation({ accountId: account.id, amountNano: 1n })),
          ),
        );
        const connections = await countConnections(schema, applicationName);
        expect(connections).toBeGreaterThan(0);
        expect(connections).toBeLessThanOrEqual(10);
      } finally {
        await store.close();
      }
      // The server ends a backend shortly after its client hangs up.
      await expect.poll(() => countConnections(schema, applicationName), { timeout: 5_000 }).toBe(0);
    });

    it("closes once, however often it is asked, and refuses work afterwards", async () => {
      const store = await openStore((await newSchema()).url);
      await Promise.all([store.close(), store.close()]);
      await store.close();
      await expect(store.listAccounts()).rejects.toThrow();
    });
  });

  describe("reserve and settle across replicas", () => {
    it("never overspends under hundreds of concurrent reserves from separate pools and threads", async () => {
      const schema = await newSchema();
      const store = await openStore(schema.url);
      const clients: StoreClient[] = [];
      try {
        const account = makeAccount({ name: "acme", balanceNano: 150n });
        await store.insertAccount(account);
        clients.push(...(await Promise.all([1, 2, 3, 4].map(() => openStore(schema.url)))));
        clients.push(...(await Promise.all([1, 2].map(() => openStoreInWorker(schema.url)))));
        const attempts = clients.flatMap((client, clientIndex) =>
          Array.from({ length: 100 }, () => {
            const reservation = makeReservation({
              accountId: account.id,
              amountNano: 1n,
              replicaId: `replica-${clientIndex}`,
            });
            return client.reserve(reservation).then((result) => ({ client, reservation, result }));
          }),
        );
        const outcomes = await Promise.all(attempts);
        const reserved = outcomes.filter((outcome) => outcome.result === "reserved");
        expect(reserved).toHaveLength(150);
        expect(outcomes.filter((outcome) => outcome.result === "insufficient_balance")).toHaveLength(450);
        expect(await store.getAccountMoney(account.id)).toEqual({
          balanceNano: 150n,
          reservedNano: 150n,
          spentNano: 0n,
        });

        // Each settles on another replica than the one that reserved, half of them at cost 0.
        await Promise.all(
          reserved.map((outcome, index) => {
            const settler = clients[(clients.indexOf(outcome.client) + 1) % clients.length] ?? store;
            return settler.settle(makeSettlement(outcome.reservation, BigInt(index % 2)));
          }),
        );
        expect(await store.getAccountMoney(account.id)).toEqual({
          balanceNano: 75n,
          reservedNano: 0n,
          spentNano: 75n,
        });
        expect(await store.audit()).toEqual([]);
      } finally {
        await Promise.all(clients.map((client) => client.close()));
        await store.close();
      }
    });

    it("answers each operation of a batch as it would alone", async () => {
      const schema = await newSchema();
      const store = await openStore(schema.url);
      try {
        const rich = makeAccount({ name: "rich", balanceNano: 1000n });
        const poor = makeAccount({ name: "poor", balanceNano: 30n });
        const other = makeAccount({ name: "other", balanceNano: 100n });
        for (const account of [rich, poor, other]) await store.insertAccount(account);
        const reservation = (account: typeof rich, amountNano: bigint) =>
          makeReservation({ accountId: account.id, amountNano });
        const existing = reservation(rich, 5n);
        expect(await store.reserve(existing)).toBe("reserved");

        // One turn of the event loop: one batch per account. The rich account's total fits; the
        // poor one's (45 of 30) does not, so each of its reservations is tried alone, in order.
        const [poorA, poorB, poorC] = [reservation(poor, 20n), reservation(poor, 20n), reservation(poor, 5n)];
        const nobody = makeAccount({ name: "nobody" });
        const reserves = await Promise.all(
          [reservation(rich, 100n), reservation(rich, 200n), poorA, poorB, poorC].map((each) =>
            store.reserve(each),
          ),
        );
        expect(reserves).toEqual(["reserved", "reserved", "reserved", "insufficient_balance", "reserved"]);
        expect(
          await Promise.all([store.reserve(reservation(nobody, 1n)), store.reserve(reservation(nobody, 2n))]),
        ).toEqual(["account_not_found", "account_not_found"]);
        // A duplicate id fails the batch's statement: each runs alone, and only the duplicate fails.
        const withDuplicate = await Promise.all([
          store.reserve(existing).catch((error: unknown) => String(error)),
          store.reserve(reservation(rich, 1n)),
        ]);
        expect(withDuplicate).toEqual([expect.stringMatching(/duplicate key/), "reserved"]);
        expect(await store.getAccountMoney(poor.id)).toEqual({
          balanceNano: 30n,
          reservedNano: 25n,
          spentNano: 0n,
        });

        const [cheap, dear, otherOne] = [
          reservation(rich, 10n),
          reservation(rich, 10n),
          reservation(other, 10n),
        ];
        const settledBefore = reservation(other, 10n);
        const foreign = reservation(other, 10n);
        for (const each of [cheap, dear, otherOne, settledBefore, foreign]) {
          expect(await store.reserve(each)).toBe("reserved");
        }
        expect(await store.settle(makeSettlement(settledBefore, 4n))).toBe(4n);

        // Batches of settles: in full, above its reservation, another account's reservation (rich);
        // settled before, in full (other); beyond the account's means (poor: 45 due, 30 there),
        // each then alone: the first within its reservation, the second capped at what is left.
        const settles = await Promise.all([
          store.settle(makeSettlement(cheap, 7n)),
          store.settle(makeSettlement(dear, 50n)),
          store
            .settle({ ...makeSettlement(foreign, 1n), accountId: rich.id })
            .catch((error: unknown) => String(error)),
          store.settle(makeSettlement(settledBefore, 4n)),
          store.settle(makeSettlement(otherOne, 3n)),
          store.settle(makeSettlement(poorA, 20n)),
          store.settle(makeSettlement(poorC, 25n)),
        ]);
        expect(settles).toEqual([
          7n,
          50n,
          expect.stringMatching(/belongs to another account/),
          // Settled before: its earlier charge, charged once.
          4n,
          3n,
          20n,
          10n,
        ]);
        expect(await store.getAccountMoney(poor.id)).toEqual({
          balanceNano: 0n,
          reservedNano: 0n,
          spentNano: 30n,
        });
        expect(await store.getAccountMoney(other.id)).toEqual({
          balanceNano: 93n,
          reservedNano: 10n,
          spentNano: 7n,
        });
        expect(await store.getAccountMoney(rich.id)).toEqual({
          balanceNano: 943n,
          reservedNano: 306n,
          spentNano: 57n,
        });
        expect(await store.audit()).toEqual(
          (await store.listReservations()).map((each) => ({ kind: "open_reservation", reservation: each })),
        );
      } finally {
        await store.close();
      }
    });

    it("charges once when replicas settle the same request at the same time", async () => {
      const schema = await newSchema();
      const stores = await Promise.all(Array.from({ length: 6 }, () => openStore(schema.url)));
      const [store] = stores as [Store];
      try {
        const account = makeAccount({ name: "acme", balanceNano: 1000n });
        await store.insertAccount(account);
        for (let round = 0; round < 10; round += 1) {
          const reservation = makeReservation({ accountId: account.id, amountNano: 50n });
          expect(await store.reserve(reservation)).toBe("reserved");
          const usage = makeSettlement(reservation, 30n);
          const charged = await Promise.all(
            stores.flatMap((each) => [each.settle(usage), each.settle(usage)]),
          );
          // Every settle reports the one charge (the money below shows it was made once).
          expect(charged).toEqual(Array.from({ length: 12 }, () => 30n));
        }
        expect(await store.getAccountMoney(account.id)).toEqual({
          balanceNano: 700n,
          reservedNano: 0n,
          spentNano: 300n,
        });
        expect(await store.audit()).toEqual([]);
      } finally {
        await Promise.all(stores.map((each) => each.close()));
      }
    });

    it("settles while another replica releases and renews reservations, without deadlocks", async () => {
      const schema = await newSchema();
      const [store, releaser] = await Promise.all([openStore(schema.url), openStore(schema.url)]);
      try {
        const accounts = [
          makeAccount({ name: "acme", balanceNano: 100_000n }),
          makeAccount({ name: "beta", balanceNano: 100_000n }),
        ];
        for (const account of accounts) await store.insertAccount(account);
        const later = new Date(Date.now() + 60_000);
        for (let round = 0; round < 3; round += 1) {
          const reservations = Array.from({ length: 120 }, (_, index) =>
            makeReservation({
              accountId: (accounts[index % 2] as (typeof accounts)[number]).id,
              amountNano: 20n,
              replicaId: `replica-${index % 3}`,
            }),
          );
          await Promise.all(
            reservations.map(async (reservation) =>
              expect(await store.reserve(reservation)).toBe("reserved"),
            ),
          );
          // Batches of settles lock reservation rows, then account rows, each in id order; so do
          // releases, and renewals lock reservation rows: PostgreSQL aborts one of two statements
          // that lock the same rows in opposite orders.
          await Promise.all([
            ...reservations.map((reservation, index) =>
              store.settle(makeSettlement(reservation, BigInt(index % 30))),
            ),
            ...["replica-0", "replica-1"].map((replicaId) => releaser.releaseReservations({ replicaId })),
            releaser.renewLeases("replica-2", later),
            store.renewLeases("replica-2", later),
          ]);
          await releaser.releaseReservations({ replicaId: "replica-2" });
          expect(await store.listReservations()).toEqual([]);
          expect(await store.audit()).toEqual([]);
        }
      } finally {
        await Promise.all([store.close(), releaser.close()]);
      }
    });
  });
});

describe("openStore with postgres:// when the database cannot be reached", () => {
  it("names the database without the URL's password", async () => {
    const error = await openStore("postgres://tollgate:hunter2@127.0.0.1:1/tollgate?schema=app").catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain(
      "Could not open the PostgreSQL store at postgres://tollgate@127.0.0.1:1/tollgate?schema=app",
    );
    expect(message).toMatch(/ECONNREFUSED/);
    expect(message).not.toContain("hunter2");
  });

  it("also for postgresql:// URLs and passwords given as a parameter", async () => {
    const error = await openStore("postgresql://tollgate@127.0.0.1:1/tollgate?password=hunter2").catch(
      (caught: unknown) => caught,
    );
    expect((error as Error).message).toContain("postgresql://tollgate@127.0.0.1:1/tollgate:");
    expect((error as Error).message).not.toContain("hunter2");
  });

  it("refuses a URL it cannot read without echoing it", async () => {
    const error = await openStore("postgres://user:hunter2@[bad/db").catch((caught: unknown) => caught);
    expect((error as Error).message).toMatch(/not a valid URL/);
    expect((error as Error).message).not.toContain("hunter2");
  });

  it("refuses a schema that is not a plain lowercase name", async () => {
    for (const schema of ["Upper", "with-dash", "pg_catalog", "1starts_with_digit", ""]) {
      await expect(openStore(`postgres://u:hunter2@127.0.0.1:1/db?schema=${schema}`)).rejects.toThrow(
        /not one Tollgate uses/,
      );
    }
  });
});

import { existsSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { openNodeSqliteDatabase } from "../../src/store/sqlite/node-sqlite-database.ts";
import { openStoreInWorker } from "./open-store-in-worker.ts";
import { describeStoreConformance, type SharedDatabase } from "./store-conformance.ts";
import { makeAccount, makeReservation, makeSettlement } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** A fresh SQLite file; other connections to it live in worker threads, as other processes would. */
async function openSharedSqliteDatabase(): Promise<SharedDatabase> {
  const url = newDatabaseUrl(directory);
  const store = await openStore(url);
  return {
    store,
    openClient: () => openStoreInWorker(url),
    async runSql(statement) {
      const database = openNodeSqliteDatabase(url.slice("sqlite:".length));
      try {
        database.prepare(statement).run([]);
      } finally {
        database.close();
      }
    },
    close: () => store.close(),
  };
}

describeStoreConformance("SQLite", {
  openFreshStore: () => openStore(newDatabaseUrl(directory)),
  openSharedDatabase: openSharedSqliteDatabase,
});

describeStoreConformance("SQLite in memory", { openFreshStore: () => openStore("sqlite::memory:") });
// The server's own store holds reservations in memory until they last a second; every reader
// sees the same ledger as above.
describeStoreConformance("SQLite owned by a server", {
  openFreshStore: () => openStore(newDatabaseUrl(directory), { owner: true }),
});

describe("openStore with sqlite:", () => {
  it("creates the file and its missing parent folders, migrated", async () => {
    const file = path.join(directory, "nested", "deeper", "tollgate.db");
    const store = await openStore(`sqlite:${file}`);
    try {
      expect(existsSync(file)).toBe(true);
      expect(await store.listAccounts()).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("accepts sqlite:///absolute/path", async () => {
    const file = path.join(directory, "triple-slash.db");
    const store = await openStore(`sqlite://${file}`);
    await store.close();
    expect(existsSync(file)).toBe(true);
  });

  it("keeps the data across reopening and runs each migration once", async () => {
    const url = newDatabaseUrl(directory);
    const first = await openStore(url);
    await first.insertAccount({
      id: "00000000-0000-4000-8000-000000000001",
      name: "acme",
      balanceNano: 5n,
      createdAt: new Date("2025-01-01T00:00:00.000Z"),
    });
    await first.close();

    const second = await openStore(url);
    try {
      expect((await second.getAccountByName("acme"))?.balanceNano).toBe(5n);
    } finally {
      await second.close();
    }
    const database = openNodeSqliteDatabase(url.slice("sqlite:".length));
    try {
      expect(database.prepare("select name from kysely_migration order by name").all([])).toEqual([
        expect.objectContaining({ name: "001_accounts_and_keys" }),
        expect.objectContaining({ name: "002_billing" }),
        expect.objectContaining({ name: "003_usage_by_time" }),
        expect.objectContaining({ name: "004_account_spent" }),
        expect.objectContaining({ name: "005_accounts_by_creation" }),
        expect.objectContaining({ name: "006_keys_by_creation" }),
      ]);
    } finally {
      database.close();
    }
  });

  it("lets two stores on one file (the CLI and a server) see each other's writes", async () => {
    const url = newDatabaseUrl(directory);
    const server = await openStore(url);
    const cli = await openStore(url);
    try {
      await cli.insertAccount({
        id: "00000000-0000-4000-8000-000000000002",
        name: "made-by-cli",
        balanceNano: 0n,
        createdAt: new Date(),
      });
      expect(await server.getAccountByName("made-by-cli")).toBeDefined();
    } finally {
      await cli.close();
      await server.close();
    }
  });

  it("shares one connection among the stores of one file in a process, so their transactions queue", async () => {
    const url = newDatabaseUrl(directory);
    const stores = await Promise.all([1, 2, 3].map(() => openStore(url)));
    try {
      const account = makeAccount({ name: "acme", balanceNano: 10n });
      await stores[0]?.insertAccount(account);
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, index) =>
          stores[index % 3]?.reserve(makeReservation({ accountId: account.id, amountNano: 1n })),
        ),
      );
      expect(results.filter((result) => result === "reserved")).toHaveLength(10);
      expect(results.filter((result) => result === "insufficient_balance")).toHaveLength(20);
    } finally {
      for (const store of stores) await store.close();
    }
  });

  it("keeps the shared connection open until its last store closes", async () => {
    const url = newDatabaseUrl(directory);
    const first = await openStore(url);
    const second = await openStore(url);
    await first.close();
    await first.close();
    expect(await second.listAccounts()).toEqual([]);
    await second.close();
    const third = await openStore(url);
    expect(await third.hasAccounts()).toBe(false);
    await third.close();
  });

  it("migrates a new file once when several processes open it at the same time", async () => {
    const url = newDatabaseUrl(directory);
    const clients = await Promise.all([1, 2, 3].map(() => openStoreInWorker(url)));
    await Promise.all(clients.map((client) => client.close()));
    const store = await openStore(url);
    try {
      expect(await store.audit()).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("gives accounts made before billing an opening credit of their balance", async () => {
    const file = path.join(directory, "before-billing.db");
    const database = openNodeSqliteDatabase(file);
    try {
      // The schema as migration 001 left it, with two accounts.
      const { accountsAndKeys } = await import("../../src/store/migrations/001-accounts-and-keys.ts");
      const { Kysely, SqliteDialect } = await import("kysely");
      const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database }) });
      await accountsAndKeys.up(db);
      database
        .prepare(
          "create table kysely_migration (name varchar(255) not null primary key, timestamp varchar(255) not null)",
        )
        .run([]);
      database
        .prepare(
          "insert into kysely_migration (name, timestamp) values ('001_accounts_and_keys', '2025-01-01T00:00:00.000Z')",
        )
        .run([]);
      const insert = database.prepare(
        "insert into accounts (id, name, balance_nano, created_at) values (?, ?, ?, '2025-01-01T00:00:00.000Z')",
      );
      insert.run(["00000000-0000-4000-8000-00000000000a", "rich", 7_000_000_000n]);
      insert.run(["00000000-0000-4000-8000-00000000000b", "empty", 0n]);
    } finally {
      database.close();
    }
    const store = await openStore(`sqlite:${file}`);
    try {
      expect(await store.audit()).toEqual([]);
      expect(await store.listCredits("00000000-0000-4000-8000-00000000000a")).toEqual([
        {
          id: "00000000-0000-4000-8000-00000000000a",
          accountId: "00000000-0000-4000-8000-00000000000a",
          amountNano: 7_000_000_000n,
          note: "opening balance",
          createdAt: new Date("2025-01-01T00:00:00.000Z"),
        },
      ]);
      expect(await store.listCredits("00000000-0000-4000-8000-00000000000b")).toEqual([]);
      expect(await store.getAccountMoney("00000000-0000-4000-8000-00000000000a")).toEqual({
        balanceNano: 7_000_000_000n,
        reservedNano: 0n,
        spentNano: 0n,
      });
    } finally {
      await store.close();
    }
  });

  it("gives accounts made before spent_nano the sum of their charges", async () => {
    const url = newDatabaseUrl(directory);
    const store = await openStore(url);
    const account = makeAccount({ name: "acme", balanceNano: 100n });
    try {
      await store.insertAccount(account);
      for (const cost of [4n, 5n]) {
        const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
        expect(await store.reserve(reservation)).toBe("reserved");
        await store.settle(makeSettlement(reservation, cost));
      }
    } finally {
      await store.close();
    }
    // Back to the schema of migration 003: no spent_nano, and 004 (and what follows) not run yet.
    const database = new DatabaseSync(url.slice("sqlite:".length), { timeout: 5000 });
    try {
      database.exec("drop index accounts_created_at_name_index");
      database.exec("drop index api_keys_created_at_public_id_index");
      database.exec("alter table accounts drop column spent_nano");
      database.exec("delete from kysely_migration where name >= '004'");
    } finally {
      database.close();
    }
    const reopened = await openStore(url);
    try {
      expect(await reopened.getAccountMoney(account.id)).toEqual({
        balanceNano: 91n,
        reservedNano: 0n,
        spentNano: 9n,
      });
      expect(await reopened.audit()).toEqual([]);
    } finally {
      await reopened.close();
    }
  });

  it("sums a large ledger in windows, letting the event loop run between them", async () => {
    const url = newDatabaseUrl(directory);
    const store = await openStore(url);
    try {
      const account = makeAccount({ name: "acme" });
      await store.insertAccount(account);
      const database = new DatabaseSync(url.slice("sqlite:".length), { timeout: 5000 });
      try {
        const insert = database.prepare(
          "insert into usage (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens, cost_nano, total_ms, created_at) values (?, 'req', ?, 'keytest00001', ?, 2, 1, 3, 1, ?)",
        );
        database.exec("begin");
        for (let row = 0; row < 25_000; row += 1) {
          insert.run(
            `u${row}`,
            account.id,
            `m${row % 3}`,
            new Date(Date.UTC(2025, 0, 1, 0, 0, row)).toISOString(),
          );
        }
        database.exec("commit");
      } finally {
        database.close();
      }
      const order: string[] = [];
      setImmediate(() => order.push("event loop"));
      const totals = await store.sumUsage({}, "model");
      order.push("sum");
      expect(order).toEqual(["event loop", "sum"]);
      expect(totals.toSorted((first, second) => (first.group < second.group ? -1 : 1))).toEqual(
        [8334, 8333, 8333].map((requests, model) => ({
          group: `m${model}`,
          accountId: undefined,
          requests,
          promptTokens: 2 * requests,
          completionTokens: requests,
          costNano: 3n * BigInt(requests),
        })),
      );
    } finally {
      await store.close();
    }
  });

  it("refuses an empty path", async () => {
    await expect(openStore("sqlite:")).rejects.toThrow(/names no file/);
  });
});

describe("openStore with other URLs", () => {
  it("refuses an unknown scheme without echoing the rest of the URL", async () => {
    await expect(openStore("mysql://root:hunter2@localhost/db")).rejects.toThrow(/sqlite:PATH/);
    await expect(openStore("mysql://root:hunter2@localhost/db")).rejects.not.toThrow(/hunter2/);
  });
});

describe("the node:sqlite adapter", () => {
  function openMemory() {
    const database = openNodeSqliteDatabase(":memory:");
    database.prepare("create table items (id integer primary key, amount bigint, label text)").run([]);
    return database;
  }

  it("turns on WAL for files, foreign keys and a busy timeout", () => {
    const database = openNodeSqliteDatabase(path.join(directory, "pragmas.db"));
    try {
      expect(database.prepare("pragma journal_mode").all([])).toEqual([{ journal_mode: "wal" }]);
      expect(database.prepare("pragma foreign_keys").all([])).toEqual([{ foreign_keys: 1n }]);
      expect(database.prepare("pragma busy_timeout").all([])).toEqual([{ timeout: 5000n }]);
    } finally {
      database.close();
    }
  });

  it("marks statements that return rows as readers", () => {
    const database = openMemory();
    try {
      expect(database.prepare("select * from items").reader).toBe(true);
      expect(database.prepare("insert into items (amount) values (?) returning id").reader).toBe(true);
      expect(database.prepare("insert into items (amount) values (?)").reader).toBe(false);
      expect(database.prepare("update items set amount = 1").reader).toBe(false);
    } finally {
      database.close();
    }
  });

  it("runs writes with changes and the last row id, and reads integers as bigint", () => {
    const database = openMemory();
    try {
      const result = database
        .prepare("insert into items (amount, label) values (?, ?)")
        .run([2n ** 62n, "a"]);
      expect(result).toEqual({ changes: 1n, lastInsertRowid: 1n });
      expect(database.prepare("select amount, label from items").all([])).toEqual([
        { amount: 4_611_686_018_427_387_904n, label: "a" },
      ]);
    } finally {
      database.close();
    }
  });

  it("iterates rows", () => {
    const database = openMemory();
    try {
      const insert = database.prepare("insert into items (amount) values (?)");
      for (const amount of [1, 2, 3]) insert.run([amount]);
      const amounts = [...database.prepare("select amount from items order by id").iterate([])];
      expect(amounts).toEqual([{ amount: 1n }, { amount: 2n }, { amount: 3n }]);
    } finally {
      database.close();
    }
  });

  it("starts transactions with the write lock, so another process waits instead of failing later", () => {
    const file = path.join(directory, "immediate.db");
    const first = openNodeSqliteDatabase(file);
    const second = openNodeSqliteDatabase(file, { busyTimeoutMilliseconds: 10 });
    try {
      first.prepare("create table items (id integer primary key)").run([]);
      first.prepare("begin").run([]);
      expect(() => second.prepare("insert into items (id) values (1)").run([])).toThrow(/locked/);
      first.prepare("rollback").run([]);
      second.prepare("insert into items (id) values (1)").run([]);
    } finally {
      first.close();
      second.close();
    }
  });

  it("reuses the prepared statement of the same SQL text", () => {
    const database = openMemory();
    try {
      expect(database.prepare("select 1")).toBe(database.prepare("select 1"));
    } finally {
      database.close();
    }
  });

  it("drops the oldest statement beyond the cache size", () => {
    const database = openNodeSqliteDatabase(":memory:", { statementCacheSize: 2 });
    try {
      const first = database.prepare("select 1");
      database.prepare("select 2");
      database.prepare("select 3");
      expect(database.prepare("select 1")).not.toBe(first);
    } finally {
      database.close();
    }
  });

  it("refuses an undefined parameter without showing values", () => {
    const database = openMemory();
    try {
      expect(() => database.prepare("insert into items (label) values (?)").run([undefined])).toThrow(
        /parameter 1 is undefined/,
      );
    } finally {
      database.close();
    }
  });
});

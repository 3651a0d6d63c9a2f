import { Kysely, SqliteDialect } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { createKyselyStore, type KyselyStore } from "../../src/store/kysely-store.ts";
import { migrateToLatest } from "../../src/store/migrate-to-latest.ts";
import {
  type NodeSqliteDatabase,
  openNodeSqliteDatabase,
} from "../../src/store/sqlite/node-sqlite-database.ts";
import { makeAccount, makeKey } from "./store-fixtures.ts";

/** A store over an in-memory SQLite database that records the SQL it runs. */
interface RecordingStore {
  store: KyselyStore;
  database: NodeSqliteDatabase;
  /** Runs `action` and answers the statements it ran, with their parameters. */
  recorded(action: () => Promise<unknown>): Promise<{ sql: string; parameters: readonly unknown[] }[]>;
}

async function openRecordingStore(): Promise<RecordingStore> {
  const database = openNodeSqliteDatabase(":memory:");
  let statements: { sql: string; parameters: readonly unknown[] }[] = [];
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database }),
    log(event) {
      statements.push({ sql: event.query.sql, parameters: event.query.parameters });
    },
  });
  await migrateToLatest(db);
  return {
    store: createKyselyStore(db),
    database,
    async recorded(action) {
      statements = [];
      await action();
      return statements;
    },
  };
}

/** SQLite's plan for a statement, one line per step. */
function planOf(database: NodeSqliteDatabase, statement: { sql: string; parameters: readonly unknown[] }) {
  const steps = database.prepare(`explain query plan ${statement.sql}`).all(statement.parameters);
  return steps.map((step) => String((step as { detail: unknown }).detail));
}

describe("finding admin keys among many user keys", () => {
  let opened: RecordingStore;

  beforeEach(async () => {
    opened = await openRecordingStore();
    const account = makeAccount({ name: "acme" });
    await opened.store.insertAccount(account);
    for (let index = 0; index < 50; index += 1) {
      await opened.store.insertApiKey(makeKey({ accountId: account.id }));
    }
  });

  afterEach(async () => {
    await opened.store.close();
  });

  it("hasAdminKey reads no user key (regression: GET /ready scanned every key)", async () => {
    const [statement, ...others] = await opened.recorded(() => opened.store.hasAdminKey());
    expect(others).toEqual([]);
    const plan = planOf(opened.database, statement as { sql: string; parameters: readonly unknown[] });
    expect(plan).toEqual(["SEARCH api_keys USING INDEX api_keys_account_id_index (account_id=?)"]);
  });

  it("listApiKeys of the admin role reads no user key", async () => {
    const [statement] = await opened.recorded(() =>
      opened.store.listApiKeys({ role: "admin" }, { limit: 10 }),
    );
    const plan = planOf(opened.database, statement as { sql: string; parameters: readonly unknown[] });
    expect(plan[0]).toBe("SEARCH api_keys USING INDEX api_keys_account_id_index (account_id=?)");
  });

  it("still tells admin keys from user keys", async () => {
    expect(await opened.store.hasAdminKey()).toBe(false);
    expect(await opened.store.listApiKeys({ role: "admin" })).toEqual([]);
    const admin = makeKey({ role: "admin", accountId: undefined });
    await opened.store.insertApiKey(admin);
    expect(await opened.store.hasAdminKey()).toBe(true);
    expect(await opened.store.listApiKeys({ role: "admin" })).toEqual([admin]);
    expect(await opened.store.listApiKeys({ role: "user" })).toHaveLength(50);
  });

  it("refuses an admin key with an account, which the lookup would miss", async () => {
    const account = makeAccount({ name: "staff" });
    await opened.store.insertAccount(account);
    await expect(
      opened.store.insertApiKey(makeKey({ role: "admin", accountId: account.id })),
    ).rejects.toThrow(RangeError);
    expect(await opened.store.hasAdminKey()).toBe(false);
  });
});

import { Kysely, SqliteDialect } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createQueryTemplate, type TemplateParameter } from "../../src/store/create-query-template.ts";
import type { Database } from "../../src/store/database.ts";
import { migrateToLatest } from "../../src/store/migrate-to-latest.ts";
import { openNodeSqliteDatabase } from "../../src/store/sqlite/node-sqlite-database.ts";

let db: Kysely<Database>;

beforeEach(async () => {
  db = new Kysely<Database>({ dialect: new SqliteDialect({ database: openNodeSqliteDatabase(":memory:") }) });
  await migrateToLatest(db);
});

afterEach(async () => {
  await db.destroy();
});

describe("createQueryTemplate", () => {
  it("compiles once and fills the named slots, keeping kysely's own constants", async () => {
    const insert = createQueryTemplate(
      (parameter: TemplateParameter<{ id: string; name: string; balance: bigint }>) =>
        db.insertInto("accounts").values({
          id: parameter("id"),
          name: parameter("name"),
          balance_nano: parameter("balance"),
          created_at: "2025-01-01T00:00:00.000Z",
        }),
    );
    const first = insert({ id: "a", name: "alpha", balance: 2n ** 62n });
    const second = insert({ id: "b", name: "bravo", balance: 1n });
    expect(second.sql).toBe(first.sql);
    expect(second.queryId).not.toBe(first.queryId);
    expect(second.parameters).toEqual(["b", "bravo", 1n, "2025-01-01T00:00:00.000Z"]);
    await db.executeQuery(first);
    await db.executeQuery(second);
    const rows = await db
      .selectFrom("accounts")
      .select(["id", "name", "balance_nano"])
      .orderBy("id")
      .execute();
    expect(rows).toEqual([
      { id: "a", name: "alpha", balance_nano: 2n ** 62n },
      { id: "b", name: "bravo", balance_nano: 1n },
    ]);
  });

  it("fills a slot used twice and keeps the row type of returning queries", async () => {
    await db
      .insertInto("accounts")
      .values({ id: "a", name: "alpha", balance_nano: 10n, created_at: "2025-01-01T00:00:00.000Z" })
      .execute();
    const take = createQueryTemplate((parameter: TemplateParameter<{ id: string; amount: bigint }>) =>
      db
        .updateTable("accounts")
        .set((eb) => ({ balance_nano: eb("balance_nano", "-", parameter("amount")) }))
        .where("id", "=", parameter("id"))
        .where("balance_nano", ">=", parameter("amount"))
        .returning(["id", "balance_nano"]),
    );
    expect((await db.executeQuery(take({ id: "a", amount: 4n }))).rows).toEqual([
      { id: "a", balance_nano: 6n },
    ]);
    expect((await db.executeQuery(take({ id: "a", amount: 7n }))).rows).toEqual([]);
  });
});

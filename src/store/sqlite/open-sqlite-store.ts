import { mkdirSync } from "node:fs";
import path from "node:path";
import { Kysely, SqliteDialect } from "kysely";
import type { Database } from "../database.ts";
import { createKyselyStore } from "../kysely-store.ts";
import { migrateToLatest } from "../migrate-to-latest.ts";
import type { Store } from "../store.ts";
import { openNodeSqliteDatabase } from "./node-sqlite-database.ts";

/**
 * Opens (creating the file and its parent folders when missing) and migrates the SQLite store
 * at `location`: a file path, or `:memory:` for a store that lives as long as the process.
 */
export async function openSqliteStore(location: string): Promise<Store> {
  if (location !== ":memory:") mkdirSync(path.dirname(path.resolve(location)), { recursive: true });
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: openNodeSqliteDatabase(location) }),
  });
  try {
    await migrateToLatest(db);
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return createKyselyStore(db);
}

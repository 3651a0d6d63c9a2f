import { type Kysely, sql } from "kysely";
import { DEFAULT_MIGRATION_TABLE, Migrator } from "kysely/migration";
import type { Database } from "./database.ts";
import { migrations } from "./migrations/migrations.ts";
import { SqliteFileError } from "./sqlite/explain-sqlite-error.ts";

/** Options of {@link migrateToLatest}. */
export interface MigrateToLatestOptions {
  /**
   * The schema that holds kysely's own tables (`kysely_migration`, `kysely_migration_lock`);
   * `undefined` (SQLite) leaves them unqualified. PostgreSQL stores name the schema they migrate:
   * without it kysely takes the tables for existing when any schema of the database has them.
   */
  migrationTableSchema?: string;
  /**
   * Told once, before the first migration runs, which migrations are pending, so that a long
   * migration (a large usage table) is not a silent start. Not called when none is pending.
   */
  onMigrating?: ((migrating: Migrating) => void) | undefined;
}

/** What {@link MigrateToLatestOptions.onMigrating} is told. */
export interface Migrating {
  /** The migrations about to run, in order. */
  pending: readonly string[];
  /** Whether the database had no migration yet (the store is being created, not upgraded). */
  created: boolean;
}

/**
 * Brings the schema up to the newest migration (creating it in an empty database). Where the
 * dialect has transactional DDL (PostgreSQL), kysely runs the pending migrations in one
 * transaction under its migration lock, and `openPostgresStore` holds an advisory lock of its
 * own around the whole call; on SQLite kysely does neither, so `openSqliteStore` runs this whole
 * call in one write transaction instead. Either way two processes starting on the same store do
 * not both apply a migration.
 *
 * Its error's message is the one line a user sees: a damaged or unwritable SQLite file throws
 * the {@link SqliteFileError} that names the file and the fix, and a database that a newer
 * Tollgate migrated says so, with the migrations this version does not know and the way out.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  options: MigrateToLatestOptions = {},
): Promise<void> {
  if (options.onMigrating !== undefined) {
    const applied = (await readAppliedMigrations(db, options.migrationTableSchema)) ?? [];
    const pending = Object.keys(migrations).filter((name) => !applied.includes(name));
    if (pending.length > 0) options.onMigrating({ pending, created: applied.length === 0 });
  }
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => ({ ...migrations }) },
    migrationTableSchema: options.migrationTableSchema,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error === undefined) return;
  // Already names the file and the fix (and keeps what tells a locked file from a bug).
  if (error instanceof SqliteFileError) throw error;
  const unknown = await readUnknownMigrations(db, options.migrationTableSchema);
  // Without its cause: kysely calls this "corrupted migrations", which it is not.
  if (unknown.length > 0) throw new Error(describeNewerSchema(unknown));
  const failed = results?.find((result) => result.status === "Error");
  const where = failed === undefined ? "" : ` (migration ${failed.migrationName})`;
  throw new Error(`Could not migrate the store to the latest schema${where}.`, { cause: error });
}

/**
 * The migrations the database records as applied that this code does not have: a newer Tollgate
 * applied them. Empty when the table cannot be read; the migration's own error then says more.
 */
async function readUnknownMigrations(db: Kysely<Database>, schema: string | undefined): Promise<string[]> {
  const applied = (await readAppliedMigrations(db, schema)) ?? [];
  return applied.filter((name) => !Object.hasOwn(migrations, name));
}

/**
 * The names of the migrations the database records as applied, in order; `undefined` where there
 * is no migration table to read (a new database, or one that cannot be read now: migrating then
 * says why). `schema` as in {@link MigrateToLatestOptions.migrationTableSchema}.
 */
export async function readAppliedMigrations(
  db: Kysely<Database>,
  schema: string | undefined,
): Promise<string[] | undefined> {
  const table =
    schema === undefined ? sql.id(DEFAULT_MIGRATION_TABLE) : sql.id(schema, DEFAULT_MIGRATION_TABLE);
  try {
    const { rows } = await sql<{ name: string }>`select name from ${table} order by name`.execute(db);
    return rows.map((row) => row.name);
  } catch {
    return undefined;
  }
}

/**
 * Where a database stands against this version: `new` (nothing applied yet), `current` (every
 * migration applied), `behind` (an older Tollgate made it: some are missing) or `newer` (it has
 * migrations this version does not know).
 */
export type SchemaState = "new" | "current" | "behind" | "newer";

/** The {@link SchemaState} of a database that has applied `applied` (from {@link readAppliedMigrations}). */
export function compareSchema(applied: readonly string[] | undefined): SchemaState {
  if (applied === undefined || applied.length === 0) return "new";
  if (applied.some((name) => !Object.hasOwn(migrations, name))) return "newer";
  return Object.keys(migrations).every((name) => applied.includes(name)) ? "current" : "behind";
}

/**
 * Refuses to migrate a database an older Tollgate made, for a caller that may not (a CLI command:
 * see `StoreOptions.upgrade`): the way out in one line.
 */
export function refuseOlderSchema(applied: readonly string[]): Error {
  const missing = Object.keys(migrations).filter((name) => !applied.includes(name));
  const names = `${missing.length === 1 ? "migration" : "migrations"} ${missing.join(", ")}`;
  return new Error(
    `The database was made by an older version of Tollgate and needs ${names}, which only \`tollgate serve\` applies: stop every server of the older version first (one left running would not keep the new schema's totals), start this version's \`tollgate serve\` once, then run this command again.`,
  );
}

function describeNewerSchema(unknown: string[]): string {
  const names = `${unknown.length === 1 ? "migration" : "migrations"} ${unknown.join(", ")}`;
  const newest = Object.keys(migrations).at(-1);
  return `The database was migrated by a newer version of Tollgate: it has ${names}, which this version does not know (its newest is ${newest}). Run that version of Tollgate or a newer one on it, or restore the backup made before the upgrade.`;
}

/**
 * A store that cannot be migrated as Tollgate starts: the error's message is the one line the
 * CLI prints, so it names what is wrong and the way out instead of "Could not migrate the store".
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { createPostgresTestSchema, runStatements, testPostgresUrl } from "./postgres-test-database.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** The message a store migrated by a newer Tollgate gives, naming the migration it has. */
function newerTollgate(migration: string): RegExp {
  return new RegExp(
    `^The database was migrated by a newer version of Tollgate: it has migration ${migration}, which this version does not know .*Run that version of Tollgate or a newer one on it, or restore the backup made before the upgrade\\.$`,
  );
}

async function rejectionMessage(promise: Promise<unknown>): Promise<string> {
  return await promise.then(
    () => {
      throw new Error("expected the store not to open");
    },
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
}

/** A migrated store's file, created and closed again. */
async function createMigratedFile(): Promise<{ url: string; file: string }> {
  const url = newDatabaseUrl(directory);
  await (await openStore(url)).close();
  return { url, file: url.slice("sqlite:".length) };
}

/**
 * Overwrites the pages of kysely's migration table (and its index) with garbage: the file still
 * opens, and the damage shows as the migration reads which migrations have run.
 */
function damageMigrationTable(file: string): void {
  const reading = new DatabaseSync(file, { readOnly: true });
  const { page_size: pageSize } = reading.prepare("pragma page_size").get() as { page_size: number };
  const pages = reading
    .prepare("select rootpage from sqlite_master where tbl_name = 'kysely_migration'")
    .all() as { rootpage: number }[];
  reading.close();
  const garbage = Buffer.alloc(pageSize, 0x55);
  const descriptor = openSync(file, "r+");
  try {
    for (const { rootpage } of pages) writeSync(descriptor, garbage, 0, pageSize, (rootpage - 1) * pageSize);
  } finally {
    closeSync(descriptor);
  }
}

describe("migrating a SQLite store that cannot be migrated", () => {
  it("names the damaged file and how to rescue it, not only that the migration failed", async () => {
    const { url, file } = await createMigratedFile();
    damageMigrationTable(file);

    const message = await rejectionMessage(openStore(url));

    expect(message).toContain(`The database ${file} is damaged`);
    expect(message).toContain(`sqlite3 ${file} .recover`);
  });

  it("says a newer Tollgate migrated the file, and leaves the file as it was", async () => {
    const { url, file } = await createMigratedFile();
    const other = new DatabaseSync(file);
    other
      .prepare("insert into kysely_migration (name, timestamp) values (?, ?)")
      .run("007_from_the_future", new Date().toISOString());
    other.close();

    expect(await rejectionMessage(openStore(url))).toMatch(newerTollgate("007_from_the_future"));

    const reading = new DatabaseSync(file, { readOnly: true });
    const names = reading.prepare("select name from kysely_migration order by name").all();
    reading.close();
    expect(names.at(-1)).toEqual({ name: "007_from_the_future" });
  });
});

// Top-level await: whether PostgreSQL is there decides whether its test runs.
const postgres = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the PostgreSQL migration test: ${postgres.skipped}.`);
afterAll(async () => {
  if (!("skipped" in postgres)) await postgres.drop();
});

describe.skipIf("skipped" in postgres)("migrating a PostgreSQL store that a newer Tollgate migrated", () => {
  it("says so instead of kysely's 'corrupted migrations'", async () => {
    if ("skipped" in postgres) return;
    await (await openStore(postgres.url)).close();
    await runStatements(testPostgresUrl(), [
      `insert into ${postgres.schema}.kysely_migration (name, timestamp) values ('007_from_the_future', now()::text)`,
    ]);

    const message = await rejectionMessage(openStore(postgres.url));

    expect(message).toMatch(
      /^Could not open the PostgreSQL store at postgres:\/\/[^ ]+: The database was migrated/,
    );
    expect(message.slice(message.indexOf("The database"))).toMatch(newerTollgate("007_from_the_future"));
    expect(message).not.toContain("corrupted");
  });
});

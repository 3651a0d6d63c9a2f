/**
 * A store that cannot be migrated as Tollgate starts: the error's message is the one line the
 * CLI prints, so it names what is wrong and the way out instead of "Could not migrate the store".
 */
import { createHash } from "node:crypto";
import { closeSync, openSync, writeSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { Client } from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { openPostgresStore } from "../../src/store/postgres/open-postgres-store.ts";
import type { MigrationLockWait } from "../../src/store/postgres/take-migration-lock.ts";
import {
  createPostgresTestSchema,
  type PostgresTestSchema,
  runStatements,
  testPostgresUrl,
} from "./postgres-test-database.ts";
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

/** The last migration undone (its index dropped, its row deleted): a file an older Tollgate made. */
const LAST_MIGRATION = "006_keys_by_creation";
const UNDO_LAST_MIGRATION = [
  "drop index api_keys_created_at_public_id_index",
  `delete from kysely_migration where name = '${LAST_MIGRATION}'`,
];

/** Migrates a test schema, then undoes its last migration: a database an older Tollgate made. */
async function makeOlderPostgresSchema(schema: PostgresTestSchema): Promise<void> {
  await (await openStore(schema.url)).close();
  await runStatements(testPostgresUrl(), [`set search_path to ${schema.schema}`, ...UNDO_LAST_MIGRATION]);
}

/** What a CLI command is told of a database an older Tollgate made. */
const OLDER_SCHEMA = new RegExp(
  `The database was made by an older version of Tollgate and needs migration ${LAST_MIGRATION}, which only \`tollgate serve\` applies: stop every server of the older version first .*then run this command again\\.$`,
);

describe("a store an older Tollgate made, opened as a CLI command opens it (upgrade: false)", () => {
  it("is refused and left as it was on SQLite; the server's open migrates it, then commands open it", async () => {
    const { url, file } = await createMigratedFile();
    const older = new DatabaseSync(file);
    for (const statement of UNDO_LAST_MIGRATION) older.exec(statement);
    older.close();
    const appliedNames = () => {
      const reading = new DatabaseSync(file, { readOnly: true });
      const rows = reading.prepare("select name from kysely_migration order by name").all();
      reading.close();
      return rows.map((row) => row.name);
    };

    expect(await rejectionMessage(openStore(url, { upgrade: false }))).toMatch(OLDER_SCHEMA);
    expect(appliedNames()).not.toContain(LAST_MIGRATION);

    await (await openStore(url, { owner: true })).close();
    expect(appliedNames()).toContain(LAST_MIGRATION);
    const command = await openStore(url, { upgrade: false });
    expect(await command.listAccounts()).toEqual([]);
    await command.close();
  });

  it("creates a new SQLite file all the same", async () => {
    const store = await openStore(newDatabaseUrl(directory), { upgrade: false });
    expect(await store.hasAccounts()).toBe(false);
    await store.close();
  });

  it.skipIf("skipped" in postgres)(
    "is refused on PostgreSQL, then migrated by the server's open",
    async () => {
      const schema = await createPostgresTestSchema();
      if ("skipped" in schema) return;
      try {
        await makeOlderPostgresSchema(schema);
        const message = await rejectionMessage(openStore(schema.url, { upgrade: false }));
        expect(message.slice(message.indexOf("The database"))).toMatch(OLDER_SCHEMA);

        await (await openStore(schema.url, { owner: true })).close();
        const command = await openStore(schema.url, { upgrade: false });
        expect(await command.hasAccounts()).toBe(false);
        await command.close();
      } finally {
        await schema.drop();
      }
    },
  );
});

describe.skipIf("skipped" in postgres)("opening a PostgreSQL store whose schema is current", () => {
  it("takes no migration lock: it opens while another session holds it", async () => {
    const schema = await createPostgresTestSchema();
    if ("skipped" in schema) return;
    const holder = new Client({ connectionString: testPostgresUrl() });
    try {
      await (await openStore(schema.url)).close();
      await holder.connect();
      const lockKey = createHash("sha256")
        .update(`tollgate.migrate:${schema.schema}`)
        .digest()
        .readBigInt64BE(0);
      await holder.query("select pg_advisory_lock($1)", [lockKey.toString()]);
      const store = await openStore(schema.url);
      expect(await store.hasAccounts()).toBe(false);
      await store.close();
    } finally {
      await holder.end();
      await schema.drop();
    }
  });
});

describe.skipIf("skipped" in postgres)(
  "migrating a PostgreSQL store that takes longer than a statement may",
  () => {
    // The store's statements time out after 300 ms here (30 s by default); migrations must not.
    const QUERY_TIMEOUT_MS = 300;
    const HOLD_MS = 1_500;

    /**
     * Holds what `statements` take on a session of its own (application_name `migration-holder`)
     * for `ms` (or until `end`), then lets go; answers the session's backend pid.
     */
    async function holdFor(
      statements: string[],
      ms = HOLD_MS,
    ): Promise<{ released: Promise<void>; pid: number; end: () => Promise<void> }> {
      const holder = new Client({
        connectionString: testPostgresUrl(),
        application_name: "migration-holder",
      });
      await holder.connect();
      const { rows } = await holder.query<{ pid: number }>("select pg_backend_pid() as pid");
      for (const statement of statements) await holder.query(statement);
      const released = new Promise<void>((resolve) => setTimeout(resolve, ms)).then(async () => {
        await holder.end();
      });
      return { released, pid: rows[0]?.pid as number, end: () => holder.end() };
    }

    const lockKeyOf = (schema: string) =>
      createHash("sha256").update(`tollgate.migrate:${schema}`).digest().readBigInt64BE(0);

    /**
     * Holds `schema`'s migration lock past the test's own timeout (only an abort or a cut ends a
     * wait for it); answers what lets it go.
     */
    async function holdMigrationLockPastTheTest(schema: string): Promise<() => Promise<void>> {
      const { released, end } = await holdFor([`select pg_advisory_lock(${lockKeyOf(schema)})`], 60_000);
      void released.catch(() => {});
      return end;
    }

    it("waits for another replica's migration lock, however long it is held, and says who holds it", async () => {
      const schema = await createPostgresTestSchema();
      if ("skipped" in schema) return;
      try {
        const { released, pid } = await holdFor([`select pg_advisory_lock(${lockKeyOf(schema.schema)})`]);
        const started = performance.now();
        const waits: MigrationLockWait[] = [];
        const store = await openPostgresStore(schema.url, {
          queryTimeoutMilliseconds: QUERY_TIMEOUT_MS,
          onMigrationWait: (wait) => waits.push(wait),
        });
        // It waited for the holder (the schema was new: it had to migrate), then migrated.
        expect(performance.now() - started).toBeGreaterThan(HOLD_MS - 100);
        // Said at once, naming the session that holds the lock (then every 10 s: not within 1.5 s).
        expect(waits).toEqual([
          {
            holder: { pid, applicationName: "migration-holder", clientAddress: "127.0.0.1" },
            waitedMs: expect.any(Number),
          },
        ]);
        expect(await store.hasAccounts()).toBe(false);
        await store.close();
        await released;
      } finally {
        await schema.drop();
      }
    });

    it("stops waiting when told to (a stop signal while the server starts), however long the lock is held", async () => {
      const schema = await createPostgresTestSchema();
      if ("skipped" in schema) return;
      const end = await holdMigrationLockPastTheTest(schema.schema);
      try {
        const stop = new AbortController();
        const opening = openPostgresStore(schema.url, {
          onMigrationWait: () => stop.abort(new Error("SIGTERM while starting")),
          signal: stop.signal,
        });
        expect(await rejectionMessage(opening)).toMatch(
          /: stopped while waiting for another process to finish migrating the store: SIGTERM while starting$/,
        );
      } finally {
        await end();
        await schema.drop();
      }
    });

    it("fails, and does not crash, when its migration connection is cut while it waits (regression: uncaught exception)", async () => {
      const schema = await createPostgresTestSchema();
      if ("skipped" in schema) return;
      const end = await holdMigrationLockPastTheTest(schema.schema);
      const applicationName = `${schema.schema}_migrating`;
      const killer = new Client({ connectionString: testPostgresUrl() });
      await killer.connect();
      try {
        let cut = false;
        const opening = openPostgresStore(`${schema.url}&application_name=${applicationName}`, {
          onMigrationWait: () => {
            if (cut) return;
            cut = true;
            void killer.query(
              "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1",
              [applicationName],
            );
          },
        });
        expect(await rejectionMessage(opening)).toMatch(/^Could not open the PostgreSQL store at /);
      } finally {
        await killer.end();
        await end();
        await schema.drop();
      }
    });

    it("lets a migration statement run past the statement timeout", async () => {
      const schema = await createPostgresTestSchema();
      if ("skipped" in schema) return;
      try {
        await makeOlderPostgresSchema(schema);
        // An open transaction that wrote to api_keys: the migration's index waits for it to end,
        // as it would behind a big table's scan.
        const { released } = await holdFor([
          "begin",
          `lock table ${schema.schema}.api_keys in row exclusive mode`,
        ]);
        const store = await openPostgresStore(schema.url, { queryTimeoutMilliseconds: QUERY_TIMEOUT_MS });
        await store.close();
        await released;
        const reader = new Client({ connectionString: testPostgresUrl() });
        await reader.connect();
        const { rows } = await reader
          .query(`select name from ${schema.schema}.kysely_migration where name = $1`, [LAST_MIGRATION])
          .finally(() => reader.end());
        expect(rows).toHaveLength(1);
      } finally {
        await schema.drop();
      }
    });
  },
);

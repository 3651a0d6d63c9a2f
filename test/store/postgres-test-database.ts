/**
 * PostgreSQL for tests: each call makes a new schema with a random name in the test database, so
 * test runs (and tests) never see each other's tables.
 *
 * The database is `TOLLGATE_TEST_POSTGRES_URL`, by default `postgres://postgres@127.0.0.1:5432/test`.
 * When it cannot be reached, tests skip with the reason, except under CI (`CI=true`), where
 * PostgreSQL is part of the machine and its absence is a failure.
 */
import { randomBytes } from "node:crypto";
import { Kysely, PostgresDialect } from "kysely";
import { Client, Pool } from "pg";
import type { Database } from "../../src/store/database.ts";
import { parsePostgresUrl } from "../../src/store/postgres/parse-postgres-url.ts";

/** The database the tests use unless `TOLLGATE_TEST_POSTGRES_URL` names another. */
export const DEFAULT_TEST_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/test";

/** A schema made for a test: `url` opens a store on it (`?schema=NAME`); `drop` removes it and its tables. */
export interface PostgresTestSchema {
  url: string;
  /** The schema's name: `tollgate_test_` and 12 random hex digits. */
  schema: string;
  drop(): Promise<void>;
}

/** The URL of the test database, without a schema. */
export function testPostgresUrl(): string {
  const configured = process.env.TOLLGATE_TEST_POSTGRES_URL;
  return configured === undefined || configured === "" ? DEFAULT_TEST_POSTGRES_URL : configured;
}

/**
 * A kysely database of one connection to the test database with `schema` on its search path, as
 * database role `role` where given (`pg_signal_backend`: a role that is shown no other role's
 * transaction starts), for the queries a store runs itself. The caller destroys it.
 */
export function openSchemaDatabase(schema: string, role?: string): Kysely<Database> {
  const options = `-c search_path=${schema}${role === undefined ? "" : ` -c role=${role}`}`;
  return new Kysely<Database>({
    dialect: new PostgresDialect({
      pool: new Pool({ connectionString: testPostgresUrl(), max: 1, options }),
    }),
  });
}

/** Set once the database was found unreachable, so later calls do not wait for it again. */
let unreachable: string | undefined;

/**
 * Creates a schema with a random name in the test database and answers a URL that points a store
 * at it, or, when PostgreSQL cannot be reached, `{ skipped: reason }`. Under CI (`CI=true`) it
 * throws instead of skipping.
 */
export async function createPostgresTestSchema(): Promise<PostgresTestSchema | { skipped: string }> {
  const baseUrl = testPostgresUrl();
  const schema = `tollgate_test_${randomBytes(6).toString("hex")}`;
  if (unreachable === undefined) {
    try {
      await runStatements(baseUrl, [`create schema ${schema}`]);
    } catch (error) {
      unreachable = `PostgreSQL at ${parsePostgresUrl(baseUrl).redacted} is unreachable (${describeError(error)}); start it or set TOLLGATE_TEST_POSTGRES_URL`;
    }
  }
  if (unreachable !== undefined) {
    if (process.env.CI === "true") {
      throw new Error(`${unreachable}. Under CI the PostgreSQL tests must run, not skip.`);
    }
    return { skipped: unreachable };
  }
  const url = new URL(baseUrl);
  url.searchParams.set("schema", schema);
  return {
    url: url.toString(),
    schema,
    drop: () => runStatements(baseUrl, [`drop schema if exists ${schema} cascade`]),
  };
}

/**
 * A new schema for one test, which the test's `cleanups` (undone after it, last first) drop;
 * throws where PostgreSQL cannot be reached (files that need it skip before their tests run).
 */
export async function createDroppedSchema(cleanups: (() => Promise<unknown>)[]): Promise<PostgresTestSchema> {
  const created = await createPostgresTestSchema();
  if ("skipped" in created) throw new Error(created.skipped);
  cleanups.push(() => created.drop());
  return created;
}

/** Runs statements on a connection of its own to `databaseUrl` (no schema on the search path). */
export async function runStatements(databaseUrl: string, statements: string[]): Promise<void> {
  const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  client.on("error", () => {
    // A connection that breaks while idle: the next query reports it.
  });
  try {
    await client.connect();
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end().catch(() => {});
  }
}

function describeError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map(describeError))].join("; ");
  }
  if (!(error instanceof Error)) return String(error);
  if (error.message !== "") return error.message;
  return "code" in error && typeof error.code === "string" ? error.code : error.name;
}

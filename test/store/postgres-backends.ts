/**
 * Helpers for tests that take a PostgreSQL store's connections away: a test names its store's
 * connections (`application_name`) so that it finds, holds up and terminates its own backends
 * only, never those of other tests sharing the database.
 */
import { Client } from "pg";
import { type PostgresTestSchema, testPostgresUrl } from "./postgres-test-database.ts";

/** The schema's URL with an application name, by which the test finds its store's backends. */
export function withApplicationName(url: string, applicationName: string): string {
  const named = new URL(url);
  named.searchParams.set("application_name", applicationName);
  return named.toString();
}

/** A connection of the test's own, on the schema. */
async function connectTo(schema: PostgresTestSchema): Promise<Client> {
  const client = new Client({ connectionString: testPostgresUrl() });
  client.on("error", () => {});
  await client.connect();
  await client.query(`set search_path to ${schema.schema}`);
  return client;
}

/**
 * Locks the rows of the accounts until the answered function is called: statements that change
 * them wait meanwhile, their connections checked out.
 */
export async function lockAccounts(
  schema: PostgresTestSchema,
  accountIds: string[],
): Promise<() => Promise<void>> {
  const client = await connectTo(schema);
  await client.query("begin");
  await client.query("select id from accounts where id = any($1::text[]) for update", [accountIds]);
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await client.query("rollback");
    await client.end();
  };
  return release;
}

/** How many backends of `applicationName` wait for a lock (see {@link lockAccounts}). */
export function countBackendsWaitingForLocks(applicationName: string): Promise<number> {
  return countWaitingBackends(applicationName, "count(*)");
}

/** Terminates the backends of `applicationName` that wait for a lock: their queries fail at once. */
export function terminateBackendsWaitingForLocks(applicationName: string): Promise<number> {
  return countWaitingBackends(applicationName, "count(pg_terminate_backend(pid))");
}

async function countWaitingBackends(applicationName: string, counted: string): Promise<number> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ count: string }>(
      `select ${counted} as count from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
      [applicationName],
    );
    return Number(rows[0]?.count);
  } finally {
    await client.end();
  }
}

/** Terminates every backend of `applicationName`, as a restart or a failover would. */
export async function terminateBackends(applicationName: string): Promise<number> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ count: string }>(
      "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()",
      [applicationName],
    );
    return Number(rows[0]?.count);
  } finally {
    await client.end();
  }
}

/**
 * A server's PostgreSQL store stamps usage rows with the time of the statement that writes them,
 * and its paged listings stay behind the writes under way (src/store/postgres/usage-stamps.ts).
 * Regression: rows were stamped by each replica before their settle went out, and settles of
 * different accounts commit in batches of their own, so a row could commit just after a row
 * stamped later was read: behind a poller's `next_after`, never listed to it (an admin review's
 * poller missed up to 1 % of rows under load).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import {
  LISTING_MARGIN_MS,
  readUsageListingHorizon,
  STATEMENT_TIME_TEXT,
} from "../../src/store/postgres/usage-stamps.ts";
import type { Account, Store } from "../../src/store/store.ts";
import {
  createPostgresTestSchema,
  openSchemaDatabase,
  type PostgresTestSchema,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { makeAccount, makeReservation, makeSettlement, makeUsage } from "./store-fixtures.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL usage listing tests: ${probe.skipped}.`);
const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

let schema: PostgresTestSchema;
let store: Store;
let account: Account;
const clients: Client[] = [];

beforeAll(async () => {
  if ("skipped" in probe) return;
  schema = probe;
  store = await openStore(schema.url, { owner: true });
  account = makeAccount({ name: "acme", balanceNano: 1_000_000_000n });
  await store.insertAccount(account);
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.end().catch(() => {});
});

afterAll(async () => {
  await store?.close();
  if (!("skipped" in probe)) await probe.drop();
});

/** A connection of the test's own on the schema. */
async function connect(): Promise<Client> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  clients.push(client);
  await client.query(`set search_path to ${schema.schema}`);
  return client;
}

/** Settles a new reservation of `costNano`, stamped (by the record) in 2020; answers its id. */
async function settleOne(requestId: string, costNano = 1n): Promise<string> {
  const reservation = makeReservation({ accountId: account.id, amountNano: costNano, requestId });
  expect(await store.reserve(reservation)).toBe("reserved");
  await store.settle(
    makeSettlement(reservation, costNano, { requestId, createdAt: new Date("2020-01-01T00:00:00.000Z") }),
  );
  return reservation.id;
}

/** Request ids of a page of at most 100 rows after `after` (the last row of an earlier page). */
async function page(after?: { createdAt: Date; id: string }): Promise<string[]> {
  const rows = await store.listUsage({}, { limit: 100, ...(after === undefined ? {} : { after }) });
  return rows.map((row) => row.requestId);
}

describeWithPostgres("the usage listing's horizon", () => {
  it("waits for a write to the usage table under way only while it is younger than the limit (an operator's session left open must not stop every poller)", async () => {
    const other = await connect();
    await other.query("begin");
    await other.query("lock table usage in row exclusive mode");
    const { rows } = await other.query<{ started: string }>(
      `select to_char(xact_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as started
      from pg_stat_activity where pid = pg_backend_pid()`,
    );
    const started = rows[0]?.started as string;
    await sleep(LISTING_MARGIN_MS + 500);
    const db = openSchemaDatabase(schema.schema);
    try {
      // Held back to the writer's start while it is young enough to be a settle...
      expect(await readUsageListingHorizon(db, 60_000)).toBe(started);
      // ...and no longer once it is older than the limit: the database's time less the margin.
      expect(await readUsageListingHorizon(db, 1_000)).not.toBe(started);
      expect((await readUsageListingHorizon(db, 1_000)) > started).toBe(true);
    } finally {
      await db.destroy();
    }
    await other.query("rollback");
  });

  it("is held back by the age limit for a write whose start another role cannot see", async () => {
    // Regression: another role's transaction start is null in pg_stat_activity (without
    // pg_read_all_stats), and min() passed over it: its rows could slip behind a cursor.
    const admin = await connect();
    await admin.query(`grant usage on schema ${schema.schema} to pg_signal_backend`);
    const other = await connect();
    await other.query("begin");
    await other.query("lock table usage in row exclusive mode");
    const db = openSchemaDatabase(schema.schema, "pg_signal_backend");
    try {
      const { rows } = await admin.query<{ now: string }>(
        `select to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as now`,
      );
      const lag = Date.parse(rows[0]?.now as string) - Date.parse(await readUsageListingHorizon(db, 60_000));
      expect(lag).toBeGreaterThan(55_000);
      expect(lag).toBeLessThan(65_000);
    } finally {
      await db.destroy();
      await other.query("rollback");
    }
  });
});

describeWithPostgres("usage rows on a server's PostgreSQL store", () => {
  it("take the database's time as they are written, settled or refused, not their record's", async () => {
    const before = Date.now();
    await settleOne("stamped");
    await store.insertUsage(
      makeUsage({
        accountId: account.id,
        requestId: "refused",
        createdAt: new Date("2020-01-01T00:00:00.000Z"),
      }),
    );
    const rows = (await store.listUsage()).filter((row) => ["stamped", "refused"].includes(row.requestId));
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      // The database's clock is this machine's.
      expect(row.createdAt.getTime()).toBeGreaterThan(before - 60_000);
      expect(row.createdAt.getTime()).toBeLessThan(Date.now() + 60_000);
    }
  });

  it("are listed a page at a time only once no write under way can still stamp an earlier time: a cursor never passes a row still to commit", async () => {
    await settleOne("first");
    await sleep(LISTING_MARGIN_MS + 200);
    const firstPage = await page();
    expect(firstPage).toContain("first");
    const all = await store.listUsage();
    const first = all.find((row) => row.requestId === "first");
    if (first === undefined) throw new Error("no first row");

    // A settle under way on another replica: its row is stamped, not committed.
    const other = await connect();
    await other.query("begin");
    await other.query(
      `insert into usage (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens,
        cost_nano, finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
      values ($1, 'in flight', $2, 'key', 'm', 1, 1, 0, 'stop', null, null, null, null, 1, 0, ${STATEMENT_TIME_TEXT})`,
      [crypto.randomUUID(), account.id],
    );
    // Meanwhile this replica's settle commits, stamped later.
    await sleep(20);
    await settleOne("later");
    await sleep(LISTING_MARGIN_MS + 200);

    // Listed now, "later" would move the cursor past the row still to commit.
    expect(await page(first)).toEqual([]);
    // An unpaged read (a sum, a look) sees what is committed.
    expect((await store.listUsage()).map((row) => row.requestId)).toContain("later");

    await other.query("commit");
    await sleep(LISTING_MARGIN_MS + 200);
    expect(await page(first)).toEqual(["in flight", "later"]);
  });
});

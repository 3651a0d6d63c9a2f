/**
 * A server's PostgreSQL store stamps new accounts and keys with the database's time, and its paged
 * listings of them stay behind the creations under way (src/store/postgres/creation-stamps.ts).
 * Regression: each replica stamped them with its own clock, and nothing held a page back from a
 * creation still to commit, so a follower of `next_after` could be passed by a row for good.
 */
import { Client } from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { CREATION_LOCK_CLASS, readCreationHorizon } from "../../src/store/postgres/creation-stamps.ts";
import { STATEMENT_TIME_TEXT } from "../../src/store/postgres/usage-stamps.ts";
import type { Account, Store } from "../../src/store/store.ts";
import {
  createPostgresTestSchema,
  openSchemaDatabase,
  type PostgresTestSchema,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { makeAccount, makeKey } from "./store-fixtures.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL creation stamp tests: ${probe.skipped}.`);
const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

/** A time no replica's clock says: what a record brings when the store stamps it itself. */
const LONG_AGO = new Date("2020-01-01T00:00:00.000Z");

let schema: PostgresTestSchema;
let store: Store;
let holder: Account;
const clients: Client[] = [];

beforeAll(async () => {
  if ("skipped" in probe) return;
  schema = probe;
  store = await openStore(schema.url, { owner: true });
  holder = makeAccount({ name: "holder" });
  await store.insertAccount(holder);
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.end().catch(() => {});
});

afterAll(async () => {
  await store?.close();
  if (!("skipped" in probe)) await probe.drop();
});

/** A connection of the test's own on the schema: another replica's. */
async function connect(): Promise<Client> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  clients.push(client);
  await client.query(`set search_path to ${schema.schema}`);
  return client;
}

/** Begins, on `client`, a creation as a replica's store makes it: announced, then stamped. */
async function beginCreation(
  client: Client,
  table: "accounts" | "api_keys",
  insert: string,
  values: unknown[],
) {
  await client.query("begin");
  await client.query(`select pg_advisory_xact_lock_shared($1::int4, '${table}'::regclass::oid::int4)`, [
    CREATION_LOCK_CLASS,
  ]);
  await client.query(insert, values);
}

async function accountPage(after?: Account): Promise<string[]> {
  const page = await store.listAccountsWithMoney({
    limit: 100,
    after: after === undefined ? undefined : { createdAt: after.createdAt, name: after.name },
  });
  return page.map((account) => account.name);
}

async function keyPage(after?: { createdAt: Date; publicId: string }): Promise<string[]> {
  const page = await store.listApiKeys({ accountId: holder.id }, { limit: 100, after });
  return page.map((key) => key.publicId);
}

/** Waits until the database's clock has passed the millisecond it says now. */
async function nextMillisecond(): Promise<void> {
  const client = await connect();
  await client.query("select pg_sleep(0.002)");
}

describeWithPostgres("accounts and keys on a server's PostgreSQL store", () => {
  it("take the database's time as they are written, not their record's, and tell it", async () => {
    const before = Date.now();
    const told: Date[] = [];
    const account = makeAccount({ name: "stamped", balanceNano: 5n, createdAt: LONG_AGO });
    expect(await store.insertAccount(account, { onCreated: (at) => told.push(at) })).toBe("created");
    const key = makeKey({ accountId: account.id, createdAt: LONG_AGO });
    await store.insertApiKey(key, { onCreated: (at) => told.push(at) });

    const stored = [
      (await store.getAccountById(account.id))?.createdAt,
      (await store.getApiKeyByPublicId(key.publicId))?.createdAt,
    ];
    expect(told).toEqual(stored);
    for (const time of told) {
      // The database's clock is this machine's.
      expect(time.getTime()).toBeGreaterThan(before - 60_000);
      expect(time.getTime()).toBeLessThan(Date.now() + 60_000);
    }
    // The opening balance's credit is made at the same time as its account.
    expect((await store.getCredit(account.id))?.createdAt).toEqual(told[0]);
  });

  it("take the database's time on a command's store that asks for it (stampCreations), and the given time on one that does not", async () => {
    const command = await openStore(schema.url, { stampCreations: true });
    const plain = await openStore(schema.url);
    try {
      const told: Date[] = [];
      await command.insertAccount(makeAccount({ name: "by-a-command", createdAt: LONG_AGO }), {
        onCreated: (at) => told.push(at),
      });
      await plain.insertAccount(makeAccount({ name: "as-given", createdAt: LONG_AGO }), {
        onCreated: (at) => told.push(at),
      });
      expect(told[0]?.getTime()).toBeGreaterThan(Date.now() - 60_000);
      expect(told[1]).toEqual(LONG_AGO);
      expect((await store.getAccountByName("as-given"))?.createdAt).toEqual(LONG_AGO);
    } finally {
      await command.close();
      await plain.close();
    }
  });

  it("are listed a page at a time only once no creation under way can still commit before them: a cursor never passes one", async () => {
    await store.insertAccount(makeAccount({ name: "first" }));
    await nextMillisecond();
    const all = await store.listAccounts();
    const first = all.find((account) => account.name === "first");
    if (first === undefined) throw new Error("no first account");
    expect(await accountPage()).toContain("first");

    // An account under way on another replica: stamped, not committed.
    const other = await connect();
    await beginCreation(
      other,
      "accounts",
      `insert into accounts (id, name, balance_nano, created_at) values ($1, 'in-flight', 0, ${STATEMENT_TIME_TEXT})`,
      [crypto.randomUUID()],
    );
    // Meanwhile this replica's commits, stamped later.
    await nextMillisecond();
    await store.insertAccount(makeAccount({ name: "later" }));
    await nextMillisecond();

    // Listed now, "later" would move the cursor past the account still to commit.
    expect(await accountPage(first)).toEqual([]);
    // A whole listing sees what is committed.
    expect((await store.listAccounts()).map((account) => account.name)).toContain("later");

    await other.query("commit");
    expect(await accountPage(first)).toEqual(["in-flight", "later"]);
  });

  it("hold key listings back the same way, by their own table's creations only", async () => {
    const first = makeKey({ accountId: holder.id, createdAt: LONG_AGO });
    let firstAt = LONG_AGO;
    await store.insertApiKey(first, { onCreated: (at) => (firstAt = at) });
    await nextMillisecond();
    expect(await keyPage()).toEqual([first.publicId]);

    const other = await connect();
    const inFlight = makeKey({ accountId: holder.id });
    await beginCreation(
      other,
      "api_keys",
      `insert into api_keys (id, public_id, account_id, role, name, secret_hash, created_at)
        values ($1, $2, $3, 'user', '', $4, ${STATEMENT_TIME_TEXT})`,
      [inFlight.id, inFlight.publicId, holder.id, inFlight.secretHash],
    );
    await nextMillisecond();
    const later = makeKey({ accountId: holder.id });
    await store.insertApiKey(later);
    await nextMillisecond();

    expect(await keyPage({ createdAt: firstAt, publicId: first.publicId })).toEqual([]);
    // A key under way does not hold accounts back.
    await store.insertAccount(makeAccount({ name: "while-a-key-is-made" }));
    await nextMillisecond();
    expect((await store.listAccountsWithMoney({ limit: 1000 })).map((account) => account.name)).toContain(
      "while-a-key-is-made",
    );

    await other.query("commit");
    expect(await keyPage({ createdAt: firstAt, publicId: first.publicId })).toEqual([
      inFlight.publicId,
      later.publicId,
    ]);
  });

  it("stop holding listings back for a creation older than the limit (a connection stalled in one)", async () => {
    const other = await connect();
    await other.query("begin");
    await other.query("select pg_advisory_xact_lock_shared($1::int4, 'accounts'::regclass::oid::int4)", [
      CREATION_LOCK_CLASS,
    ]);
    const { rows } = await other.query<{ started: string }>(
      `select to_char(xact_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as started
      from pg_stat_activity where pid = pg_backend_pid()`,
    );
    const started = rows[0]?.started as string;
    await nextMillisecond();
    const db = openSchemaDatabase(schema.schema);
    try {
      // Held back to the creation's start while it is young enough to be one of a replica's...
      expect(await readCreationHorizon(db, "accounts", 60_000)).toBe(started);
      // ...and no longer once it is older than the limit.
      expect((await readCreationHorizon(db, "accounts", 1)) > started).toBe(true);
      // Keys are not held back by an account under way.
      expect((await readCreationHorizon(db, "api_keys", 60_000)) > started).toBe(true);
    } finally {
      await db.destroy();
    }
    await other.query("rollback");
  });

  it("hold listings back by the age limit for a creation whose start another role cannot see", async () => {
    // Regression: pg_stat_activity shows another role's transaction start as null (without
    // pg_read_all_stats), and min() passed over it: a CLI of another role could be passed.
    const admin = await connect();
    await admin.query(`grant usage on schema ${schema.schema} to pg_signal_backend`);
    const other = await connect();
    await other.query("begin");
    await other.query("select pg_advisory_xact_lock_shared($1::int4, 'accounts'::regclass::oid::int4)", [
      CREATION_LOCK_CLASS,
    ]);
    const db = openSchemaDatabase(schema.schema, "pg_signal_backend");
    try {
      const { rows } = await admin.query<{ now: string }>(
        `select to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as now`,
      );
      const now = rows[0]?.now as string;
      const horizon = await readCreationHorizon(db, "accounts", 60_000);
      // About a minute before now: held back, though the creation's start is not known.
      const lag = Date.parse(now) - Date.parse(horizon);
      expect(lag).toBeGreaterThan(55_000);
      expect(lag).toBeLessThan(65_000);
    } finally {
      await db.destroy();
      await other.query("rollback");
    }
  });
});

import { Client } from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { normalizeError } from "../../src/api/errors.ts";
import { openPostgresStore } from "../../src/store/postgres/open-postgres-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import { lockAccounts, withApplicationName } from "./postgres-backends.ts";
import {
  createDroppedSchema,
  createPostgresTestSchema,
  type PostgresTestSchema,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { makeAccount, makeReservation } from "./store-fixtures.ts";

/**
 * The PostgreSQL store when the network to the database drops bytes for a while without closing
 * anything (a proxy or a firewall that black-holes them): a statement gets no answer, `pg` gives
 * up at the store's `query_timeout` and leaves the connection mid-statement. Once the network is
 * healthy again, the next statements must find a connection that answers, not one still waiting
 * for an answer that will never come. The store keeps one connection, so that it would be reused.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL timed-out connection tests: ${probe.skipped}.`);
else await probe.drop();

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The store's statement timeout; `pg` gives up a second later (see `openPostgresStore`). */
const QUERY_TIMEOUT_MS = 300;

/**
 * A store of one connection, named `applicationName`, reached through a proxy that can black-hole
 * its bytes (mode `drop`: nothing closed, nothing answered).
 */
async function openProxiedStore(
  schema: PostgresTestSchema,
  applicationName: string,
): Promise<{ store: Store; proxy: TcpProxy }> {
  const target = new URL(testPostgresUrl());
  const proxy = await startTcpProxy({
    targetHost: target.hostname,
    targetPort: Number(target.port || 5432),
    mode: "forward",
  });
  cleanups.push(() => proxy.close());
  const url = new URL(withApplicationName(schema.url, applicationName));
  url.host = `127.0.0.1:${proxy.port}`;
  const store = await openPostgresStore(url.toString(), {
    poolSize: 1,
    queryTimeoutMilliseconds: QUERY_TIMEOUT_MS,
    connectionTimeoutMilliseconds: 10_000,
  });
  cleanups.push(() => store.close());
  return { store, proxy };
}

/** The error `promise` failed with, or a failure of the test when it succeeded. */
async function failureOf(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    (value: unknown) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) throw new Error(`expected a failure, got ${String(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(Error);
  return outcome.error as Error;
}

/** The process ids of the backends named `applicationName`. */
async function backendsOf(applicationName: string): Promise<number[]> {
  const client = new Client({ connectionString: testPostgresUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      "select pid from pg_stat_activity where application_name = $1 order by pid",
      [applicationName],
    );
    return rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}

const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

describeWithPostgres("the PostgreSQL store after a statement the network black-holed", () => {
  it("answers on a new connection once the network is healthy, not on the one left waiting", async () => {
    const schema = await createDroppedSchema(cleanups);
    const { store, proxy } = await openProxiedStore(schema, `${schema.schema}_statement`);
    const account = makeAccount({ name: "account", balanceNano: 1_000n });
    expect(await store.insertAccount(account)).toBe("created");

    proxy.setMode("drop");
    const lost = await failureOf(store.hasAccounts());
    // pg's client gave up, not the server: the connection is mid-statement.
    expect(lost.message).toMatch(/^Query read timeout/);
    expect(normalizeError(lost)).toMatchObject({ code: "store_unavailable", status: 503 });

    proxy.setMode("forward");
    expect(await store.hasAccounts()).toBe(true);
    expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe("reserved");
  });

  for (const [where, sqlText] of [
    ["at its begin", "begin"],
    ["after its begin", 'insert into "accounts"'],
  ] as const) {
    it(`answers on a new connection after a transaction black-holed ${where}`, async () => {
      const schema = await createDroppedSchema(cleanups);
      const { store, proxy } = await openProxiedStore(schema, `${schema.schema}_transaction`);
      expect(await store.insertAccount(makeAccount({ name: "before" }))).toBe("created");

      proxy.dropFrom((chunk) => chunk.includes(sqlText));
      const lost = await failureOf(store.insertAccount(makeAccount({ name: "lost" })));
      expect(lost.message).toMatch(/^Query read timeout/);

      proxy.setMode("forward");
      expect(await store.insertAccount(makeAccount({ name: "after" }))).toBe("created");
      expect((await store.listAccounts()).map((account) => account.name).sort()).toEqual(["after", "before"]);
    });
  }

  it("keeps a connection on which the server answered with an error, its statement timeout included", async () => {
    const schema = await createDroppedSchema(cleanups);
    const applicationName = `${schema.schema}_kept`;
    const { store } = await openProxiedStore(schema, applicationName);
    const account = makeAccount({ name: "locked", balanceNano: 1_000n });
    expect(await store.insertAccount(account)).toBe("created");
    const [backend] = await backendsOf(applicationName);
    expect(backend).toBeDefined();

    const release = await lockAccounts(schema, [account.id]);
    cleanups.push(release);
    const cancelled = await failureOf(
      store.reserve(makeReservation({ accountId: account.id, amountNano: 1n })),
    );
    // The server cancelled the statement (statement_timeout): the connection is healthy.
    expect((cancelled as Error & { code?: string }).code).toBe("57014");
    await release();

    expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe("reserved");
    expect(await backendsOf(applicationName)).toEqual([backend]);
  });
});

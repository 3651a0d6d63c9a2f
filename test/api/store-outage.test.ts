import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { normalizeError } from "../../src/api/errors.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import { type MockUpstream, startMockUpstream } from "../engine/openai/mock-upstream.ts";
import {
  createPostgresTestSchema,
  type PostgresTestSchema,
  runStatements,
  testPostgresUrl,
} from "../store/postgres-test-database.ts";
import { findFreePort } from "../support/free-port.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

/**
 * The store going away while the server runs is an outage, not a bug: clients get 503
 * `store_unavailable` with `retry-after`, as for any other unavailability, never a 500.
 */
const postgres: PostgresTestSchema | { skipped: string } = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the PostgreSQL outage cases: ${postgres.skipped}.`);
const REMOTE = "acme/remote:v1";

interface WireBody {
  error: { message: string; type: string; code: string; param: string | null };
}

async function expectStoreUnavailable(response: Response): Promise<void> {
  const text = await response.text();
  expect(response.status, text).toBe(503);
  expect(response.headers.get("retry-after")).toBe("5");
  const body = JSON.parse(text) as WireBody;
  expect(body.error).toMatchObject({ type: "server_error", code: "store_unavailable", param: null });
  expect(body.error.message).toMatch(/database is unavailable.*retry/i);
  // Nothing about where the database is.
  expect(text).not.toMatch(/postgres|127\.0\.0\.1|5432|tollgate_test_/i);
}

describe.skipIf(!("url" in postgres))("a server whose PostgreSQL goes away while it runs", () => {
  let proxy: TcpProxy;
  let upstream: MockUpstream;
  let server: RunningServer;
  let store: Store;

  beforeAll(async () => {
    if (!("url" in postgres)) return;
    const direct = new URL(postgres.url);
    proxy = await startTcpProxy({
      targetHost: direct.hostname,
      targetPort: Number(direct.port || 5432),
      mode: "forward",
    });
    const proxied = new URL(postgres.url);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(proxy.port);
    upstream = await startMockUpstream();
    server = await startServer({
      config: createTestConfig({
        database: proxied.toString(),
        models: [createUpstreamModelEntry(REMOTE, upstream.baseUrl)],
      }),
      logger: false,
    });
    // Keys are made beside the server, straight on PostgreSQL.
    store = await openStore(postgres.url);
  });

  afterAll(async () => {
    await server?.close();
    await store?.close();
    await upstream?.close();
    await proxy?.close();
    if ("url" in postgres) await postgres.drop();
  });

  async function createFundedKey(name: string): Promise<string> {
    const account = await createAccount(store, { name, balanceNano: 1_000_000_000n });
    return (await createKey(store, { role: "user", accountId: account.id })).key;
  }

  function chat(key: string): Promise<Response> {
    return fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: REMOTE, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }),
    });
  }

  it("answers 503 store_unavailable with retry-after on /v1/models and chat completions, cut or refused", async () => {
    const warm = await createFundedKey("warm");
    const fresh = await createFundedKey("fresh");
    const answered = await chat(warm);
    expect(answered.status, await answered.text()).toBe(200);

    // Every open connection is cut, and each new one is closed as soon as it opens.
    proxy.setMode("cut");
    await expectStoreUnavailable(
      await fetch(`${server.baseUrl}/models`, { headers: { authorization: `Bearer ${fresh}` } }),
    );
    await expectStoreUnavailable(await chat(warm));

    // Nothing listens any more: connections are refused.
    await proxy.close();
    await expectStoreUnavailable(
      await fetch(`${server.baseUrl}/models`, { headers: { authorization: `Bearer ${fresh}` } }),
    );
    await expectStoreUnavailable(await chat(warm));
  });
});

describe.skipIf(!("url" in postgres))("a server whose PostgreSQL schema goes away while it runs", () => {
  // Regression: a schema dropped (or renamed, or its tables) under a running server gave 500
  // internal_error with no retry-after, while /ready said the store did not answer.
  it("answers 503 store_unavailable while the schema is missing, then serves again", async () => {
    const schema = await createPostgresTestSchema();
    if ("skipped" in schema) throw new Error(schema.skipped);
    const away = `${schema.schema}_away`;
    const upstream = await startMockUpstream();
    const server = await startServer({
      config: createTestConfig({
        database: schema.url,
        models: [createUpstreamModelEntry(REMOTE, upstream.baseUrl)],
      }),
      logger: false,
    });
    const store = await openStore(schema.url);
    try {
      const account = await createAccount(store, { name: "schema", balanceNano: 1_000_000_000n });
      const { key } = await createKey(store, { role: "user", accountId: account.id });
      const chat = () =>
        fetch(`${server.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: REMOTE, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }),
        });
      const answered = await chat();
      expect(answered.status, await answered.text()).toBe(200);

      await runStatements(testPostgresUrl(), [`alter schema ${schema.schema} rename to ${away}`]);
      await expectStoreUnavailable(await chat());
      await expectStoreUnavailable(
        await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/admin/usage`, {
          headers: { authorization: `Bearer ${server.createdKeys.adminKey}` },
        }),
      );

      await runStatements(testPostgresUrl(), [`alter schema ${away} rename to ${schema.schema}`]);
      const again = await chat();
      expect(again.status, await again.text()).toBe(200);
      // The first answer's charge and the last one's: nothing charged for the 503.
      expect((await store.listUsage({ accountId: account.id })).length).toBe(2);
    } finally {
      await server.close();
      await store.close();
      await upstream.close();
      // Back in place when the test failed while it was away.
      await runStatements(testPostgresUrl(), [`alter schema ${away} rename to ${schema.schema}`]).catch(
        () => undefined,
      );
      await schema.drop();
    }
  });
});

describe("store failures as the error normalization sees them", () => {
  it("maps a PostgreSQL connection that is refused to store_unavailable, without the address", async () => {
    const client = new Client({
      connectionString: `postgres://postgres@127.0.0.1:${await findFreePort()}/test`,
    });
    const refused = await client.connect().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeDefined();
    const normalized = normalizeError(refused);
    expect(normalized.code).toBe("store_unavailable");
    expect(normalized.status).toBe(503);
    expect(normalized.retryAfterSeconds).toBe(5);
    expect(normalized.message).not.toMatch(/127\.0\.0\.1|postgres/);
  });

  it.skipIf(!("url" in postgres))(
    "maps a PostgreSQL that cannot write (a standby reached after a failover) to store_unavailable",
    async () => {
      const client = new Client({ connectionString: testPostgresUrl() });
      await client.connect();
      try {
        await client.query("SET default_transaction_read_only = on");
        const readOnly = await client.query("CREATE TABLE tollgate_read_only_probe (x integer)").then(
          () => undefined,
          (error: unknown) => error,
        );
        expect((readOnly as { code?: string }).code).toBe("25006");
        expect(normalizeError(readOnly)).toMatchObject({ code: "store_unavailable", status: 503 });
      } finally {
        await client.end();
      }
    },
  );

  it("maps SQLite still locked after its busy timeout to store_unavailable", () => {
    const folder = mkdtempSync(join(tmpdir(), "tollgate-busy-"));
    const file = join(folder, "busy.db");
    const holder = new DatabaseSync(file);
    const waiter = new DatabaseSync(file, { timeout: 0 });
    try {
      holder.exec("create table t (x integer); begin immediate; insert into t values (1)");
      let busy: unknown;
      try {
        waiter.exec("insert into t values (2)");
      } catch (error) {
        busy = error;
      }
      expect(busy).toBeDefined();
      expect(normalizeError(busy).code).toBe("store_unavailable");
      holder.exec("rollback");
    } finally {
      waiter.close();
      holder.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("leaves other failures internal_error", () => {
    expect(normalizeError(new TypeError("x is not a function")).code).toBe("internal_error");
    const fetchFailure = new TypeError("fetch failed", {
      cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
    });
    expect(normalizeError(fetchFailure).code).toBe("internal_error");
  });
});

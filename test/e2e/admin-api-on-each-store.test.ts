import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeUsage } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

/**
 * The admin API answers the same whichever store the server runs on, for input one store keeps
 * and the other cannot: PostgreSQL's text holds no NUL (U+0000), where SQLite's does.
 */
const folder = makeTemporaryDirectory();
const postgres = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the admin API on PostgreSQL: ${postgres.skipped}.`);
const MODEL = "acme/remote:v1";

const STORES = [
  { store: "SQLite", databaseUrl: newDatabaseUrl(folder), skipped: undefined },
  "url" in postgres
    ? { store: "PostgreSQL", databaseUrl: postgres.url, skipped: undefined }
    : { store: "PostgreSQL", databaseUrl: "", skipped: postgres.skipped },
];

afterAll(async () => {
  if ("url" in postgres) await postgres.drop();
});

describe.each(STORES)("the admin API on $store", ({ databaseUrl, skipped }) => {
  let server: RunningServer;
  let store: Store;
  let origin: string;
  let adminKey: string;

  beforeAll(async () => {
    if (skipped !== undefined) return;
    server = await startServer({
      config: createTestConfig({
        database: databaseUrl,
        // Never called: the admin API only needs a catalogue to check keys' models against.
        models: [createUpstreamModelEntry(MODEL, "http://127.0.0.1:9/v1")],
      }),
      logger: false,
    });
    origin = server.baseUrl.replace(/\/v1$/, "");
    adminKey = server.createdKeys.adminKey ?? "";
    store = await openStore(databaseUrl);
    const starter = await store.getAccountByName("starter");
    if (starter === undefined) throw new Error("no starter account");
    await store.insertUsage(makeUsage({ accountId: starter.id, model: MODEL, requestId: "req_1" }));
  });

  afterAll(async () => {
    await server?.close();
    await store?.close();
  });

  async function admin(method: string, path: string, body?: unknown, headers = {}) {
    const response = await fetch(`${origin}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${adminKey}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      text,
      body: text.startsWith("{") ? JSON.parse(text) : undefined,
    };
  }

  type Answer = Awaited<ReturnType<typeof admin>>;

  function expectError(answer: Answer, status: number, code: string, param: string): void {
    expect(answer.status, answer.text).toBe(status);
    expect(answer.body.error).toMatchObject({ code, param });
  }

  it.skipIf(skipped !== undefined)(
    "finds no account for a name or id with a NUL, as for an unknown name, never a 500",
    async () => {
      const notFound = (answer: Answer) => {
        expectError(answer, 404, "not_found", "account");
        expect(answer.body.error.message).toBe('No account has the name or id "a\\u0000b".');
      };
      notFound(await admin("GET", "/admin/accounts/a%00b"));
      notFound(await admin("POST", "/admin/accounts/a%00b/credits", { amount: "1" }));
      notFound(await admin("GET", "/admin/keys?account=a%00b"));
      notFound(await admin("POST", "/admin/keys", { account: "a\u0000b" }));
      notFound(await admin("GET", "/admin/usage?account=a%00b"));
      notFound(await admin("GET", "/admin/usage?account=a%00b&format=csv"));
    },
  );

  it.skipIf(skipped !== undefined)(
    "finds no usage for a model with a NUL, as for an unknown model, as JSON, groups and CSV",
    async () => {
      expect((await admin("GET", `/admin/usage?model=${encodeURIComponent(MODEL)}`)).body.data).toHaveLength(
        1,
      );
      const rows = await admin("GET", "/admin/usage?model=a%00b");
      expect(rows.status, rows.text).toBe(200);
      expect(rows.body).toEqual({ object: "list", data: [], has_more: false, next_after: null });
      const groups = await admin("GET", "/admin/usage?model=a%00b&group_by=model");
      expect(groups.body).toEqual({ object: "list", group_by: "model", data: [] });
      const csv = await admin("GET", "/admin/usage?model=a%00b&format=csv");
      expect(csv.status).toBe(200);
      expect(csv.text).toMatch(/^request_id,[a-z_,]+\r\n$/);
      const groupedCsv = await admin("GET", "/admin/usage?model=a%00b&format=csv&group_by=day");
      expect(groupedCsv.text).toBe("day,requests,prompt_tokens,completion_tokens,cost\r\n");
    },
  );

  it.skipIf(skipped !== undefined)(
    "refuses a usage cursor or key reference with a NUL as one it never handed out",
    async () => {
      const cursor = Buffer.from("2026-01-01T00:00:00.000Z a\u0000b").toString("base64url");
      expectError(await admin("GET", `/admin/usage?after=${cursor}`), 400, "invalid_value", "after");
      expectError(await admin("GET", "/admin/usage?key=abc%00"), 400, "invalid_value", "key");
    },
  );

  it.skipIf(skipped !== undefined)(
    "refuses a value to store with half of a surrogate pair, naming the field (regression: stored as U+FFFD, a credit's replay)",
    async () => {
      const starterId = (await store.getAccountByName("starter"))?.id ?? "";
      const creditsBefore = (await store.listCredits(starterId)).length;
      const headers = { "idempotency-key": "surrogate-note" };
      const note = await admin(
        "POST",
        "/admin/accounts/starter/credits",
        { amount: "1", note: "a\ud800b" },
        headers,
      );
      expectError(note, 400, "invalid_value", "note");
      expect(note.body.error.message).toMatch(/half of a surrogate pair/);
      expect(await store.listCredits(starterId)).toHaveLength(creditsBefore);
      // A whole character is stored as it came.
      const whole = await admin(
        "POST",
        "/admin/accounts/starter/credits",
        { amount: "1", note: "a\u{1F600}b" },
        headers,
      );
      expect(whole.status, whole.text).toBe(201);
      expect(whole.body.credit.note).toBe("a\u{1F600}b");
      expectError(await admin("POST", "/admin/accounts", { name: "a\udfff" }), 400, "invalid_value", "name");
      expectError(
        await admin("POST", "/admin/keys", { account: "starter", name: "ci\udbff" }),
        400,
        "invalid_value",
        "name",
      );
    },
  );

  it.skipIf(skipped !== undefined)("refuses a value to store with a NUL, naming the field", async () => {
    const keysBefore = (await store.listApiKeys()).length;
    const starterId = (await store.getAccountByName("starter"))?.id ?? "";
    const creditsBefore = (await store.listCredits(starterId)).length;
    const note = await admin("POST", "/admin/accounts/starter/credits", { amount: "1", note: "line\u0000" });
    expectError(note, 400, "invalid_value", "note");
    expect(note.body.error.message).toMatch(/NUL/);
    expect(await store.listCredits(starterId)).toHaveLength(creditsBefore);
    expectError(await admin("POST", "/admin/accounts", { name: "a\u0000b" }), 400, "invalid_value", "name");
    expectError(
      await admin("POST", "/admin/keys", { account: "starter", name: "ci\u0000" }),
      400,
      "invalid_value",
      "name",
    );
    expectError(
      await admin("POST", "/admin/keys", { account: "starter", models: [MODEL, "a\u0000b"] }),
      400,
      "invalid_value",
      "models",
    );
    expect(await store.listApiKeys()).toHaveLength(keysBefore);
  });
});

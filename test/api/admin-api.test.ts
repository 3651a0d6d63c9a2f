import { PassThrough } from "node:stream";
import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createKey } from "../../src/admin/create-key.ts";
import { USAGE_PAGE_ROWS } from "../../src/admin/usage-report.ts";
import { parseApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeReservation, makeSettlement, makeUsage } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { buildAdminTestApp } from "./build-admin-test-app.ts";

const directory = makeTemporaryDirectory();
const NOW = new Date("2025-06-01T12:00:00.000Z");

let store: Store;
let app: FastifyInstance;
let adminKey: string;
let userKey: string;
const revoked: string[] = [];
const credited: string[] = [];
/** The app's JSON log lines. */
let logs: PassThrough;

/** The admin app on this test's store, its JSON log lines in {@link logs}. */
function buildAdminApp(): FastifyInstance {
  const authenticator = createAuthenticator({ store });
  return buildAdminTestApp({
    authenticator,
    logs,
    routes: {
      store,
      modelIds: () => ["m1", "m2", "gpt-4o-mini"],
      onKeyChanged: (publicId) => {
        revoked.push(publicId);
        authenticator.forget(publicId);
      },
      onAccountCredited: (accountId) => credited.push(accountId),
      now: () => NOW,
    },
  });
}

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  adminKey = (await createKey(store, { role: "admin", accountId: undefined })).key;
  await store.insertAccount({
    id: "00000000-0000-4000-8000-000000000001",
    name: "staff",
    balanceNano: 0n,
    createdAt: new Date("2025-01-01T00:00:00.000Z"),
  });
  userKey = (await createKey(store, { role: "user", accountId: "00000000-0000-4000-8000-000000000001" })).key;
  revoked.length = 0;
  credited.length = 0;
  logs = new PassThrough();
  app = buildAdminApp();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await app.close();
  await store.close();
});

interface CallOptions {
  key?: string | undefined;
  body?: unknown;
}

async function call(method: "GET" | "POST", url: string, options: CallOptions = {}) {
  const key = "key" in options ? options.key : adminKey;
  const response = await app.inject({
    method,
    url,
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(options.body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    text: response.body,
    json: () => response.json(),
  };
}

async function expectError(
  response: Awaited<ReturnType<typeof call>>,
  status: number,
  code: string,
  param: string | null,
  message?: RegExp,
) {
  expect(response.status).toBe(status);
  const body = response.json() as { error: { code: string; param: string | null; message: string } };
  expect(body.error.code).toBe(code);
  expect(body.error.param).toBe(param);
  if (message !== undefined) expect(body.error.message).toMatch(message);
}

describe("admin API authentication", () => {
  it("answers 401 without a key and with a bad key", async () => {
    await expectError(await call("GET", "/admin/accounts", { key: undefined }), 401, "invalid_api_key", null);
    await expectError(
      await call("GET", "/admin/accounts", {
        key: "sk-tg-zzzzzzzzzzzz-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ",
      }),
      401,
      "invalid_api_key",
      null,
    );
  });

  it("answers 403 admin_key_required to a user key, before looking at the body", async () => {
    const response = await call("POST", "/admin/accounts", { key: userKey, body: { name: 5 } });
    await expectError(response, 403, "admin_key_required", null, /admin key/);
    expect(response.headers["x-should-retry"]).toBe("false");
    await expectError(await call("GET", "/admin/usage", { key: userKey }), 403, "admin_key_required", null);
    expect(await store.getAccountByName("5")).toBeUndefined();
  });
});

describe("admin API accounts", () => {
  it("lists keys a page at a time, one account's too, with a cursor that finds keys made later", async () => {
    const made: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const created = await call("POST", "/admin/keys", { body: { account: "staff", name: `k${index}` } });
      made.push((created.json() as { public_id: string }).public_id);
    }
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const query = `account=staff&limit=2${after === undefined ? "" : `&after=${after}`}`;
      const page = (await call("GET", `/admin/keys?${query}`)).json() as {
        data: { public_id: string }[];
        has_more: boolean;
        next_after: string;
      };
      pages += 1;
      seen.push(...page.data.map((key) => key.public_id));
      after = page.next_after;
      if (!page.has_more) break;
    }
    // Made in one millisecond (the test's clock): by public id among them; then staff's own key,
    // made earlier on the real clock, which is later than the test's.
    expect(pages).toBe(2);
    expect(seen.slice(0, 3)).toEqual([...made].sort());
    expect(seen).toHaveLength(4);
    expect((await call("GET", `/admin/keys?account=staff&after=${after}`)).json()).toMatchObject({
      data: [],
      has_more: false,
      next_after: after,
    });
    for (const limit of ["0", "10001", "x"]) {
      await expectError(await call("GET", `/admin/keys?limit=${limit}`), 400, "invalid_value", "limit");
    }
    await expectError(await call("GET", "/admin/keys?after=bm90IGEgY3Vyc29y"), 400, "invalid_value", "after");
  });

  it("lists accounts a page at a time, oldest first, with a cursor that finds accounts made later", async () => {
    for (const name of ["delta", "bravo", "charlie"]) {
      expect((await call("POST", "/admin/accounts", { body: { name } })).status).toBe(201);
    }
    const seen: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const response = await call(
        "GET",
        `/admin/accounts?limit=2${after === undefined ? "" : `&after=${after}`}`,
      );
      expect(response.status).toBe(200);
      const page = response.json() as { data: { name: string }[]; has_more: boolean; next_after: string };
      seen.push(page.data.map((each) => each.name));
      after = page.next_after;
      if (!page.has_more) break;
    }
    // "staff" was opened before the others, which share one millisecond: by name among them.
    expect(seen).toEqual([
      ["staff", "bravo"],
      ["charlie", "delta"],
    ]);
    expect((await call("GET", `/admin/accounts?after=${after}`)).json()).toEqual({
      object: "list",
      data: [],
      has_more: false,
      next_after: after,
    });
    await call("POST", "/admin/accounts", { body: { name: "echo", balance: "1.5" } });
    expect((await call("GET", `/admin/accounts?after=${after}`)).json()).toEqual({
      object: "list",
      data: [{ id: expect.any(String), name: "echo", balance: "1.5", reserved: "0", spent: "0" }],
      has_more: false,
      next_after: expect.any(String),
    });
    expect((await call("GET", "/admin/accounts")).json()).toMatchObject({
      has_more: false,
      next_after: expect.any(String),
    });
    for (const limit of ["0", "10001", "1.5", "x"]) {
      await expectError(await call("GET", `/admin/accounts?limit=${limit}`), 400, "invalid_value", "limit");
    }
    await expectError(
      await call("GET", "/admin/accounts?after=bm90IGEgY3Vyc29y"),
      400,
      "invalid_value",
      "after",
    );
  });

  it("creates, lists, shows and credits an account", async () => {
    const created = await call("POST", "/admin/accounts", { body: { name: "acme", balance: "10.5" } });
    expect(created.status).toBe(201);
    const account = created.json() as { id: string };
    expect(account).toEqual({
      id: expect.any(String),
      name: "acme",
      balance: "10.5",
      reserved: "0",
      spent: "0",
    });

    const listed = await call("GET", "/admin/accounts");
    expect(listed.status).toBe(200);
    expect(
      (listed.json() as { object: string; data: { name: string }[] }).data.map((each) => each.name),
    ).toEqual(["staff", "acme"]);

    const credit = await call("POST", "/admin/accounts/acme/credits", {
      body: { amount: "0.000000001", note: "top-up" },
    });
    expect(credit.status).toBe(201);
    expect(credit.json()).toEqual({
      credit: {
        id: expect.any(String),
        amount: "0.000000001",
        note: "top-up",
        created_at: NOW.toISOString(),
      },
      account: { id: account.id, name: "acme", balance: "10.500000001", reserved: "0", spent: "0" },
    });
    expect(credited).toEqual([account.id]);

    const reservation = makeReservation({ accountId: account.id, amountNano: 2_000_000_000n });
    await store.reserve(reservation);
    await store.settle(makeSettlement(reservation, 500_000_000n));
    await store.reserve(makeReservation({ accountId: account.id, amountNano: 1_000_000_000n }));
    for (const reference of ["acme", account.id]) {
      const shown = await call("GET", `/admin/accounts/${reference}`);
      expect(shown.status).toBe(200);
      expect(shown.json()).toEqual({
        id: account.id,
        name: "acme",
        balance: "10.000000001",
        reserved: "1",
        spent: "0.5",
      });
    }
    expect(await store.audit()).toHaveLength(1);
  });

  it("answers a credit or an account it made from what it wrote, with no read after the commit (regression: 503, and a retry credited twice)", async () => {
    // The store takes the writes, then fails every read of an account's money (a failover).
    vi.spyOn(store, "getAccountMoney").mockRejectedValue(new Error("Connection terminated unexpectedly"));
    const created = await call("POST", "/admin/accounts", { body: { name: "acme", balance: "2" } });
    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({ name: "acme", balance: "2", reserved: "0", spent: "0" });

    const credit = await call("POST", "/admin/accounts/acme/credits", { body: { amount: "3" } });
    expect(credit.status).toBe(201);
    expect(credit.json()).toMatchObject({ credit: { amount: "3" }, account: { balance: "5", spent: "0" } });
    vi.restoreAllMocks();
    const account = await store.getAccountByName("acme");
    expect(account?.balanceNano).toBe(5_000_000_000n);
    expect(await store.listCredits(account?.id ?? "")).toHaveLength(2);
  });

  it("finds the credit an Idempotency-Key made by its id, not among the account's every credit", async () => {
    await call("POST", "/admin/accounts", { body: { name: "acme", balance: "1" } });
    const credit = () =>
      app.inject({
        method: "POST",
        url: "/admin/accounts/acme/credits",
        headers: {
          authorization: `Bearer ${adminKey}`,
          "content-type": "application/json",
          "idempotency-key": "order-42",
        },
        payload: JSON.stringify({ amount: "2" }),
      });
    expect((await credit()).statusCode).toBe(201);
    const listed = vi.spyOn(store, "listCredits");
    const replay = await credit();
    expect(replay.statusCode).toBe(201);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.json()).toMatchObject({ credit: { amount: "2" }, account: { balance: "3" } });
    expect(listed).not.toHaveBeenCalled();
  });

  it("opens an account with balance 0 by default", async () => {
    const created = await call("POST", "/admin/accounts", { body: { name: "acme" } });
    expect(created.json()).toMatchObject({ balance: "0" });
  });

  it.each([
    ["a missing name", {}, 400, "missing_required_parameter", "name"],
    ["a number as name", { name: 5 }, 400, "invalid_type", "name"],
    ["a number as balance", { name: "acme", balance: 10 }, 400, "invalid_type", "balance"],
    ["a negative balance", { name: "acme", balance: "-1" }, 400, "invalid_value", "balance"],
    ["too many decimals", { name: "acme", balance: "0.0000000001" }, 400, "invalid_value", "balance"],
    ["a bad name", { name: "has space" }, 400, "invalid_value", "name"],
    ["an unknown field", { name: "acme", balanse: "10" }, 400, "invalid_value", "balanse"],
  ])("refuses %s", async (_case, body, status, code, param) => {
    await expectError(await call("POST", "/admin/accounts", { body }), status, code, param);
    expect(await store.getAccountByName("acme")).toBeUndefined();
  });

  it("refuses a body that is not an object, or no body", async () => {
    await expectError(await call("POST", "/admin/accounts", { body: ["acme"] }), 400, "invalid_type", null);
    await expectError(await call("POST", "/admin/accounts"), 400, "invalid_type", null);
  });

  it("refuses an invalid name without sending it back whole (regression: a 1 MB name made a 1 MB error)", async () => {
    const response = await call("POST", "/admin/accounts", { body: { name: `${"x ".repeat(500_000)}` } });
    await expectError(
      response,
      400,
      "invalid_value",
      "name",
      /^"(x ){40}\.\.\." is not a valid account name/,
    );
    expect(response.text.length).toBeLessThan(1000);
  });

  it("refuses a name already taken", async () => {
    await call("POST", "/admin/accounts", { body: { name: "acme" } });
    await expectError(
      await call("POST", "/admin/accounts", { body: { name: "acme" } }),
      400,
      "invalid_value",
      "name",
      /already exists/,
    );
  });

  it("answers 404 not_found for an unknown account", async () => {
    await expectError(await call("GET", "/admin/accounts/nobody"), 404, "not_found", "account", /nobody/);
    await expectError(
      await call("POST", "/admin/accounts/nobody/credits", { body: { amount: "1" } }),
      404,
      "not_found",
      "account",
    );
    expect(credited).toEqual([]);
  });

  it.each([
    ["a number", { amount: 1 }, "invalid_type", "amount"],
    ["zero", { amount: "0" }, "invalid_value", "amount"],
    ["an exponent", { amount: "1e3" }, "invalid_value", "amount"],
    ["a missing amount", { note: "x" }, "missing_required_parameter", "amount"],
    ["a long note", { amount: "1", note: "x".repeat(501) }, "invalid_value", "note"],
  ])("refuses a credit with %s", async (_case, body, code, param) => {
    await call("POST", "/admin/accounts", { body: { name: "acme", balance: "1" } });
    await expectError(await call("POST", "/admin/accounts/acme/credits", { body }), 400, code, param);
    expect((await store.getAccountByName("acme"))?.balanceNano).toBe(1_000_000_000n);
  });

  it("says a negative credit must be more than 0, as zero is told and as the CLI says it", async () => {
    await call("POST", "/admin/accounts", { body: { name: "acme", balance: "1" } });
    const credit = (amount: string) => call("POST", "/admin/accounts/acme/credits", { body: { amount } });
    await expectError(
      await credit("-1"),
      400,
      "invalid_value",
      "amount",
      /^Invalid 'amount': "-1" is negative; the amount to credit must be more than 0\.$/,
    );
    await expectError(
      await credit("-0"),
      400,
      "invalid_value",
      "amount",
      /^Invalid 'amount': "-0" has a minus sign; the amount to credit must be more than 0\.$/,
    );
  });
});

describe("admin API keys", () => {
  it("creates a key shown once, lists it without its secret, and revokes it", async () => {
    await call("POST", "/admin/accounts", { body: { name: "acme", balance: "1" } });
    const created = await call("POST", "/admin/keys", {
      body: {
        account: "acme",
        name: "ci",
        models: ["m1", "m2"],
        rpm: 60,
        tpm: null,
        expires_at: "2030-01-01",
      },
    });
    expect(created.status).toBe(201);
    const key = created.json() as Record<string, unknown> & { key: string; public_id: string };
    const account = await store.getAccountByName("acme");
    expect(parseApiKey(key.key)?.publicId).toBe(key.public_id);
    expect(key).toEqual({
      key: key.key,
      public_id: key.public_id,
      account_id: account?.id,
      account: "acme",
      role: "user",
      name: "ci",
      models: ["m1", "m2"],
      rpm: 60,
      tpm: null,
      expires_at: "2030-01-01T00:00:00.000Z",
      revoked_at: null,
      created_at: NOW.toISOString(),
    });

    const listed = await call("GET", "/admin/keys?account=acme");
    expect(listed.status).toBe(200);
    const { key: _secret, ...shown } = key;
    expect(listed.json()).toEqual({
      object: "list",
      data: [shown],
      has_more: false,
      next_after: expect.any(String),
    });
    expect(listed.text).not.toContain(key.key.slice(-43));
    expect((await call("GET", "/admin/keys")).json()).toMatchObject({
      data: expect.arrayContaining([shown]),
    });

    // The key works until it is revoked; then it is refused at once here.
    const revoke = await call("POST", `/admin/keys/${key.public_id}/revoke`);
    expect(revoke.status).toBe(200);
    expect(revoke.json()).toEqual({ ...shown, revoked_at: NOW.toISOString(), already_revoked: false });
    expect(revoked).toEqual([key.public_id]);
    const again = await call("POST", `/admin/keys/${key.public_id}/revoke`);
    expect(again.json()).toMatchObject({ already_revoked: true });
  });

  it("makes a key with every model and no limits by default", async () => {
    const created = await call("POST", "/admin/keys", { body: { account: "staff" } });
    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({ name: "", models: null, rpm: null, tpm: null, expires_at: null });
  });

  it("refuses a name with a lone surrogate, which no store keeps as it came", async () => {
    // Stored as U+FFFD, a name other than the one sent: refused, as `user` is on a chat request.
    const refused = await call("POST", "/admin/keys", { body: { account: "staff", name: "a\ud800b" } });
    await expectError(refused, 400, "invalid_value", "name");
  });

  it("takes an expiry with more than 3 digits of fraction, as Python and Go write it", async () => {
    const created = await call("POST", "/admin/keys", {
      body: { account: "staff", expires_at: "2030-01-01T23:59:59.999999+00:00" },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json()).toMatchObject({ expires_at: "2030-01-01T23:59:59.999Z" });
  });

  it("stops a revoked admin key at once", async () => {
    const other = await createKey(store, { role: "admin", accountId: undefined });
    expect((await call("GET", "/admin/accounts", { key: other.key })).status).toBe(200);
    await call("POST", `/admin/keys/${other.record.publicId}/revoke`);
    await expectError(await call("GET", "/admin/accounts", { key: other.key }), 401, "invalid_api_key", null);
  });

  it.each([
    ["an unknown account", { account: "nobody" }, 404, "not_found", "account"],
    ["a missing account", { name: "x" }, 400, "missing_required_parameter", "account"],
    ["an rpm of 0", { account: "staff", rpm: 0 }, 400, "invalid_value", "rpm"],
    [
      "an expiry past the year 9999 in UTC",
      { account: "staff", expires_at: "9999-12-31T23:59:59-05:00" },
      400,
      "invalid_value",
      "expires_at",
    ],
    ["a fractional tpm", { account: "staff", tpm: 1.5 }, 400, "invalid_type", "tpm"],
    ["an rpm as a string", { account: "staff", rpm: "60" }, 400, "invalid_type", "rpm"],
    ["an empty model list", { account: "staff", models: [] }, 400, "invalid_value", "models"],
    ["a blank model", { account: "staff", models: [" "] }, 400, "invalid_value", "models"],
    [
      "a model not in the catalogue",
      { account: "staff", models: ["m1", "m9"] },
      400,
      "invalid_value",
      "models",
    ],
    ["a past expiry", { account: "staff", expires_at: "2020-01-01" }, 400, "invalid_value", "expires_at"],
    ["a bad expiry", { account: "staff", expires_at: "soon" }, 400, "invalid_value", "expires_at"],
    ["an unknown field", { account: "staff", role: "admin" }, 400, "invalid_value", "role"],
  ])("refuses a key with %s", async (_case, body, status, code, param) => {
    const before = (await store.listApiKeys()).length;
    await expectError(await call("POST", "/admin/keys", { body }), status, code, param);
    expect(await store.listApiKeys()).toHaveLength(before);
  });

  it("names the catalogue's models, or the one meant, when a key asks for an unknown one", async () => {
    const typo = await call("POST", "/admin/keys", { body: { account: "staff", models: ["gpt-4o-mni"] } });
    expect(typo.json()).toMatchObject({
      error: {
        message: "No model 'gpt-4o-mni' in the catalogue. Did you mean 'gpt-4o-mini'?",
        param: "models",
      },
    });
    const unknown = await call("POST", "/admin/keys", { body: { account: "staff", models: ["llama-70b"] } });
    expect(unknown.json()).toMatchObject({
      error: { message: "No model 'llama-70b' in the catalogue. The catalogue has: m1, m2, gpt-4o-mini." },
    });
    // At most 256 characters of it (regression: a 5,000-character id was repeated whole).
    const long = await call("POST", "/admin/keys", {
      body: { account: "staff", models: ["L".repeat(5_000)] },
    });
    const { message } = (long.json() as { error: { message: string } }).error;
    expect(message).toContain(`No model '${"L".repeat(256)}...' in the catalogue.`);
  });

  it("refuses to revoke an unknown key or one named by anything but its public id", async () => {
    await expectError(await call("POST", "/admin/keys/zzzzzzzzzzzz/revoke"), 404, "not_found", "id");
    await expectError(await call("POST", `/admin/keys/${userKey}/revoke`), 400, "invalid_value", "id");
    expect(revoked).toEqual([]);
  });

  it("answers 404 for the keys of an unknown account", async () => {
    await expectError(await call("GET", "/admin/keys?account=nobody"), 404, "not_found", "account");
  });
});

describe("admin API usage", () => {
  const staffId = "00000000-0000-4000-8000-000000000001";

  beforeEach(async () => {
    await store.credit({
      id: "c1",
      accountId: staffId,
      amountNano: 10_000_000_000n,
      note: undefined,
      createdAt: NOW,
    });
    const first = makeReservation({ accountId: staffId, amountNano: 1_000_000_000n, model: "small" });
    await store.reserve(first);
    await store.settle(
      makeSettlement(first, 250_000_000n, {
        requestId: "req,1",
        user: "=HYPERLINK(1)",
        createdAt: new Date("2025-06-01T10:00:00.000Z"),
      }),
    );
    await store.insertUsage(
      makeUsage({
        accountId: staffId,
        model: "large",
        requestId: "req_2",
        errorCode: "rate_limit_exceeded",
        finishReason: undefined,
        createdAt: new Date("2025-06-02T10:00:00.000Z"),
      }),
    );
  });

  it("lists rows as JSON", async () => {
    const response = await call("GET", "/admin/usage?account=staff");
    expect(response.status).toBe(200);
    expect(response.json()).toEqual({
      object: "list",
      data: [
        {
          request_id: "req,1",
          account: "staff",
          key: "keytest00001",
          model: "small",
          prompt_tokens: 10,
          completion_tokens: 5,
          cost: "0.25",
          finish_reason: "stop",
          error_code: null,
          estimated: false,
          created: "2025-06-01T10:00:00.000Z",
          user: "=HYPERLINK(1)",
          queue_ms: 1,
          first_token_ms: 2,
          total_ms: 3,
          id: expect.any(String),
        },
        expect.objectContaining({ request_id: "req_2", cost: "0", error_code: "rate_limit_exceeded" }),
      ],
      has_more: false,
      next_after: expect.any(String),
    });
  });

  it("pages rows with limit and after, and hands out a cursor for rows that come later", async () => {
    for (let row = 3; row <= 5; row += 1) {
      await store.insertUsage(
        makeUsage({
          accountId: staffId,
          requestId: `req_${row}`,
          createdAt: new Date(Date.UTC(2025, 5, row, 10)),
        }),
      );
    }
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const response = await call(
        "GET",
        `/admin/usage?limit=2${after === undefined ? "" : `&after=${after}`}`,
      );
      expect(response.status).toBe(200);
      const page = response.json() as {
        data: { request_id: string }[];
        has_more: boolean;
        next_after: string;
      };
      pages += 1;
      seen.push(...page.data.map((row) => row.request_id));
      expect(page.data.length).toBe(page.has_more ? 2 : 1);
      after = page.next_after;
      if (!page.has_more) break;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(["req,1", "req_2", "req_3", "req_4", "req_5"]);
    // The last page's cursor finds nothing now (and is given back), and the rows that come later.
    expect((await call("GET", `/admin/usage?after=${after}`)).json()).toEqual({
      object: "list",
      data: [],
      has_more: false,
      next_after: after,
    });
    await store.insertUsage(
      makeUsage({ accountId: staffId, requestId: "req_6", createdAt: new Date(Date.UTC(2025, 5, 7)) }),
    );
    expect((await call("GET", `/admin/usage?after=${after}`)).json()).toMatchObject({
      data: [{ request_id: "req_6" }],
      has_more: false,
    });
    // Filters apply within pages.
    expect(
      (await call("GET", `/admin/usage?model=large&limit=1`)).json() as {
        data: unknown[];
        has_more: boolean;
      },
    ).toMatchObject({ data: [{ request_id: "req_2" }], has_more: false });
    const csv = await call("GET", "/admin/usage?format=csv&limit=2&since=2025-06-02");
    expect(csv.text.split("\r\n").map((line) => line.split(",")[0])).toEqual([
      "request_id",
      "req_2",
      "req_3",
      "",
    ]);
    // A CSV page says where the next begins in headers (regression: it could not be continued).
    expect(csv.headers["x-has-more"]).toBe("true");
    const json = (await call("GET", "/admin/usage?limit=2&since=2025-06-02")).json() as {
      next_after: string;
    };
    expect(csv.headers["x-next-after"]).toBe(json.next_after);
    // Page by page, the CSV goes as the JSON does, to an empty last page that keeps the cursor.
    let csvAfter = csv.headers["x-next-after"] as string;
    for (let csvPages = 0; csvPages < 10; csvPages++) {
      const query = `limit=2&since=2025-06-02&after=${csvAfter}`;
      const next = await call("GET", `/admin/usage?format=csv&${query}`);
      const page = (await call("GET", `/admin/usage?${query}`)).json() as {
        data: { request_id: string }[];
        has_more: boolean;
        next_after: string;
      };
      expect(
        next.text
          .split("\r\n")
          .slice(1, -1)
          .map((line) => line.split(",")[0]),
      ).toEqual(page.data.map((row) => row.request_id));
      expect(next.headers["x-has-more"]).toBe(String(page.has_more));
      expect(next.headers["x-next-after"]).toBe(page.next_after);
      if (page.data.length === 0) break;
      csvAfter = page.next_after;
    }
    // Without a limit, every row, streamed: no position to give.
    expect((await call("GET", "/admin/usage?format=csv")).headers["x-has-more"]).toBeUndefined();
  });

  it("streams CSV of a ledger longer than a page, every row in order", async () => {
    const rows = USAGE_PAGE_ROWS + 10;
    for (let row = 0; row < rows; row += 1) {
      await store.insertUsage(
        makeUsage({
          accountId: staffId,
          requestId: `bulk_${String(row).padStart(5, "0")}`,
          createdAt: new Date(Date.UTC(2025, 6, 1, 0, 0, row)),
        }),
      );
    }
    const response = await call("GET", "/admin/usage?format=csv&since=2025-07-01");
    expect(response.status).toBe(200);
    const lines = response.text.split("\r\n");
    expect(lines).toHaveLength(rows + 2);
    expect(lines.slice(1, -1).map((line) => line.split(",")[0])).toEqual(
      Array.from({ length: rows }, (_, row) => `bulk_${String(row).padStart(5, "0")}`),
    );
    const json = (await call("GET", "/admin/usage?since=2025-07-01")).json() as {
      data: unknown[];
      has_more: boolean;
    };
    expect(json.data).toHaveLength(USAGE_PAGE_ROWS);
    expect(json.has_more).toBe(true);
  });

  it("filters and groups", async () => {
    expect((await call("GET", "/admin/usage?model=large&since=2025-06-02")).json()).toMatchObject({
      data: [{ request_id: "req_2" }],
    });
    expect((await call("GET", "/admin/usage?until=2025-06-02T00:00:00Z")).json()).toMatchObject({
      data: [{ request_id: "req,1" }],
    });
    expect((await call("GET", "/admin/usage?since=2025-06-02T09:59:59.999999999Z")).json()).toMatchObject({
      data: [{ request_id: "req_2" }],
    });
    expect((await call("GET", "/admin/usage?group_by=day")).json()).toEqual({
      object: "list",
      group_by: "day",
      data: [
        { day: "2025-06-01", requests: 1, prompt_tokens: 10, completion_tokens: 5, cost: "0.25" },
        { day: "2025-06-02", requests: 1, prompt_tokens: 10, completion_tokens: 5, cost: "0" },
      ],
    });
  });

  it("answers CSV as text/csv with a header and quoted cells", async () => {
    const response = await call("GET", "/admin/usage?format=csv");
    expect(response.status).toBe(200);
    expect(response.headers["content-type"]).toBe("text/csv; charset=utf-8");
    const ids = (
      (await call("GET", "/admin/usage")).json() as { data: { request_id: string; id: string }[] }
    ).data.map((row) => row.id);
    expect(response.text).toBe(
      [
        "request_id,account,key,model,prompt_tokens,completion_tokens,cost,finish_reason,error_code,estimated,created,user,queue_ms,first_token_ms,total_ms,id",
        `"req,1",staff,keytest00001,small,10,5,0.25,stop,,false,2025-06-01T10:00:00.000Z,'=HYPERLINK(1),1,2,3,${ids[0]}`,
        `req_2,staff,keytest00001,large,10,5,0,,rate_limit_exceeded,false,2025-06-02T10:00:00.000Z,,1,2,3,${ids[1]}`,
        "",
      ].join("\r\n"),
    );
    const grouped = await call("GET", "/admin/usage?format=csv&group_by=model");
    expect(grouped.text).toBe(
      ["model,requests,prompt_tokens,completion_tokens,cost", "large,1,10,5,0", "small,1,10,5,0.25", ""].join(
        "\r\n",
      ),
    );
  });

  it("answers HEAD of a CSV export with its headers and without reading the ledger (regression: the whole export read and dropped)", async () => {
    const listUsage = vi.spyOn(store, "listUsage");
    const response = await app.inject({
      method: "HEAD",
      url: "/admin/usage?format=csv",
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-type"]).toBe("text/csv; charset=utf-8");
    // No length that says the export is empty.
    expect(response.headers["content-length"]).toBeUndefined();
    expect(response.body).toBe("");
    expect(listUsage).not.toHaveBeenCalled();
    // Its refusals are GET's.
    const refused = await app.inject({
      method: "HEAD",
      url: "/admin/usage?format=csv&since=yesterday",
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(refused.statusCode).toBe(400);
  });

  it("answers the store's error, not a 200 cut short, when the first page of a CSV fails", async () => {
    vi.spyOn(store, "listUsage").mockRejectedValueOnce(new Error("the store failed"));
    const response = await call("GET", "/admin/usage?format=csv");
    await expectError(response, 500, "internal_error", null);
    vi.spyOn(store, "sumUsage").mockRejectedValueOnce(new Error("the store failed"));
    await expectError(await call("GET", "/admin/usage?format=csv&group_by=day"), 500, "internal_error", null);
  });

  it("cuts a CSV short when a later page fails, and logs why", async () => {
    const fullPage = Array.from({ length: USAGE_PAGE_ROWS }, (_, row) =>
      makeUsage({ accountId: staffId, requestId: `bulk_${row}` }),
    );
    vi.spyOn(store, "listUsage")
      .mockResolvedValueOnce(fullPage)
      .mockRejectedValueOnce(new Error("the store failed on page 2"));
    await app.listen({ host: "127.0.0.1", port: 0 });
    const address = app.server.address();
    const port = typeof address === "object" && address !== null ? address.port : 0;
    const response = await fetch(`http://127.0.0.1:${port}/admin/usage?format=csv`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    // The status went out with the first page: only the cut connection can tell the client.
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
    const lines = (logs.read() as Buffer | null)?.toString() ?? "";
    const logged = lines
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message: string } })
      .find((line) => line.err?.message === "the store failed on page 2");
    expect(logged).toMatchObject({ level: 50, msg: expect.stringMatching(/usage CSV cut short/) });
  });

  it.each([
    ["an unknown grouping", "group_by=week", 400, "invalid_value", "group_by"],
    ["an unknown format", "format=xml", 400, "invalid_value", "format"],
    ["a bad since", "since=yesterday", 400, "invalid_value", "since"],
    // In UTC past the year 9999: stored as +010000-..., which sorts before every row as text.
    ["an until past the year 9999", "until=9999-12-31T23:00:00-05:00", 400, "invalid_value", "until"],
    ["an unknown account", "account=nobody", 404, "not_found", "account"],
    ["an unknown key", "key=zzzzzzzzzzzz", 404, "not_found", "key"],
    ["a limit of 0", "limit=0", 400, "invalid_value", "limit"],
    ["a limit above 10000", "limit=10001", 400, "invalid_value", "limit"],
    ["a limit that is not a number", "limit=ten", 400, "invalid_value", "limit"],
    ["a cursor it did not hand out", "after=bm90LWEtY3Vyc29y", 400, "invalid_value", "after"],
    ["a cursor that is not base64url", "after=%2F%2F", 400, "invalid_value", "after"],
    ["a limit with group_by", "group_by=day&limit=5", 400, "invalid_value", "limit"],
    ["a cursor with group_by", "group_by=day&after=x", 400, "invalid_value", "after"],
  ])("refuses %s", async (_case, query, status, code, param) => {
    await expectError(await call("GET", `/admin/usage?${query}`), status, code, param);
  });
});

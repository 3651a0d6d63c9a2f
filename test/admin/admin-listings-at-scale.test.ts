import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { runUsageCommand } from "../../src/admin/usage-command.ts";
import { registerAdminRoutes } from "../../src/api/routes/admin.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount, makeKey, makeReservation, makeSettlement } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

/**
 * Regression: with many accounts, `GET /admin/usage`, `GET /admin/keys`, `GET /admin/accounts`,
 * `accounts list` and `usage` read every account (and the account listings ran one more query per
 * account): on SQLite each such read blocks the event loop, so all traffic, for as long as it
 * takes. Their work is counted here in store calls and in the accounts those calls read, never in
 * time; what they answer must stay what it was, byte for byte.
 */

const directory = makeTemporaryDirectory();
const postgres = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the PostgreSQL cases: ${postgres.skipped}.`);
else await postgres.drop();

const ACME = "00000000-0000-4000-8000-00000000000a";
const BETA = "00000000-0000-4000-8000-00000000000b";
const ZETA = "00000000-0000-4000-8000-00000000000c";
const ADMIN_KEY = "adminkey0001";
/** Accounts no listed row refers to: the answers must not read them one by one, or at all. */
const BYSTANDERS = 60;

/** The store calls made through a {@link countCalls} store: method and arguments, in order. */
interface Call {
  method: string;
  arguments: unknown[];
}

/** `store`, recording every call made through it. */
function countCalls(store: Store): { store: Store; calls: Call[] } {
  const calls: Call[] = [];
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return (...parameters: unknown[]) => {
        calls.push({ method: property, arguments: parameters });
        return Reflect.apply(value, target, parameters);
      };
    },
  });
  return { store: counted, calls };
}

/** How many accounts the calls read: every one for a whole listing, the ids asked for otherwise. */
function accountsRead(calls: readonly Call[], accountCount: number): number {
  let read = 0;
  for (const call of calls) {
    if (call.method === "listAccounts") read += accountCount;
    if (call.method === "listAccountsWithMoney") {
      const page = call.arguments[0] as { limit: number } | undefined;
      read += page === undefined ? accountCount : Math.min(page.limit, accountCount);
    }
    if (call.method === "getAccountsByIds") read += (call.arguments[0] as readonly string[]).length;
    if (call.method === "getAccountMoney" || call.method === "getAccountBalance") read += 1;
  }
  return read;
}

interface Backend {
  name: string;
  /** Opens a fresh, empty store; `owner` as a server opens it (SQLite then holds reservations in memory). */
  open(): Promise<{ store: Store; drop(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: "SQLite",
    open: async () => ({ store: await openStore(newDatabaseUrl(directory)), drop: async () => {} }),
  },
  {
    // Reservations held in memory, not in the file: the listing must count them all the same.
    name: "SQLite owned by a server",
    open: async () => ({
      store: await openStore(newDatabaseUrl(directory), { owner: true }),
      drop: async () => {},
    }),
  },
  ...("skipped" in postgres
    ? []
    : [
        {
          name: "PostgreSQL",
          async open() {
            const schema = (await createPostgresTestSchema()) as PostgresTestSchema;
            return { store: await openStore(schema.url), drop: () => schema.drop() };
          },
        },
      ]),
];

describe.each(backends)("admin listings on $name", (backend) => {
  let store: Store;
  let drop: () => Promise<void>;
  let app: FastifyInstance;
  let counted: { store: Store; calls: Call[] };

  beforeEach(async () => {
    ({ store, drop } = await backend.open());
    await seed(store);
    counted = countCalls(store);
    app = Fastify();
    registerAdminRoutes(app, {
      store: counted.store,
      getKey: () => ({ role: "admin", publicId: ADMIN_KEY }),
    });
  });

  afterEach(async () => {
    await app.close();
    await store.close();
    await drop();
  });

  async function get(url: string): Promise<string> {
    const response = await app.inject({ method: "GET", url });
    expect(response.statusCode, response.body).toBe(200);
    return response.body;
  }

  /** The calls `action` makes, counted from a clean slate. */
  async function callsOf(action: () => Promise<unknown>): Promise<Call[]> {
    counted.calls.length = 0;
    await action();
    return [...counted.calls];
  }

  async function addBystanders(): Promise<void> {
    for (let index = 0; index < BYSTANDERS; index += 1) {
      await store.insertAccount(
        makeAccount({ name: `bystander-${index}`, createdAt: new Date("2025-03-01T00:00:00.000Z") }),
      );
    }
  }

  it("GET /admin/accounts answers as before, reservations and spending included", async () => {
    expect(await get("/admin/accounts")).toBe(
      '{"object":"list","data":[' +
        `{"id":"${ACME}","name":"acme","balance":"9.9","reserved":"0.5","spent":"0.1"},` +
        `{"id":"${BETA}","name":"beta","balance":"4.25","reserved":"0","spent":"0.75"},` +
        `{"id":"${ZETA}","name":"zeta","balance":"1.5","reserved":"0.000000001","spent":"0"}],` +
        `"has_more":false,"next_after":"${Buffer.from(`accounts 2025-01-02T00:00:00.000Z zeta`).toString("base64url")}"}`,
    );
  });

  it("GET /admin/accounts makes as many store calls with many accounts as with three", async () => {
    const few = await callsOf(() => get("/admin/accounts"));
    await addBystanders();
    const many = await callsOf(() => get("/admin/accounts"));
    expect(JSON.parse(await get("/admin/accounts")).data).toHaveLength(3 + BYSTANDERS);
    expect(many.map((call) => call.method)).toEqual(few.map((call) => call.method));
  });

  it("GET /admin/accounts reads a page of accounts, not every one", async () => {
    await addBystanders();
    const calls = await callsOf(async () => {
      const first = JSON.parse(await get("/admin/accounts?limit=2"));
      expect(first.data.map((account: { name: string }) => account.name)).toEqual(["acme", "beta"]);
      expect(first.has_more).toBe(true);
      const second = JSON.parse(await get(`/admin/accounts?limit=2&after=${first.next_after}`));
      expect(second.data.map((account: { name: string }) => account.name)).toEqual(["zeta", "bystander-0"]);
    });
    // Each page reads its accounts and the one it looks ahead at.
    expect(accountsRead(calls, 3 + BYSTANDERS)).toBe(6);
  });

  it("accounts list prints as before, in as many store calls with many accounts as with three", async () => {
    const out = collectOutput();
    const few = await callsOf(() => runAccountsCommand(counted.store, ["list"], out));
    expect(out.lines).toEqual([
      "ID                                    NAME  BALANCE  RESERVED     SPENT  CREATED",
      `${ACME}  acme  9.9      0.5          0.1    2025-01-01T00:00:00Z`,
      `${BETA}  beta  4.25     0            0.75   2025-01-02T00:00:00Z`,
      `${ZETA}  zeta  1.5      0.000000001  0      2025-01-02T00:00:00Z`,
    ]);
    await addBystanders();
    const many = await callsOf(() => runAccountsCommand(counted.store, ["list"], collectOutput()));
    expect(many.map((call) => call.method)).toEqual(few.map((call) => call.method));
  });

  it("GET /admin/usage answers as before and reads only the accounts its rows name", async () => {
    await addBystanders();
    const accounts = 3 + BYSTANDERS;
    const calls = await callsOf(async () => {
      const first = JSON.parse(await get("/admin/usage?limit=1"));
      expect(first.data.map((row: { account: string }) => row.account)).toEqual(["acme"]);
      expect(first.has_more).toBe(true);
      const second = JSON.parse(await get(`/admin/usage?limit=1&after=${first.next_after}`));
      expect(second.data.map((row: { account: string }) => row.account)).toEqual(["beta"]);
    });
    // Each page reads the accounts of its rows and of the one row it looks ahead at, no more.
    expect(accountsRead(calls, accounts)).toBeLessThanOrEqual(4);
    const body = await get("/admin/usage");
    const ids = (await store.listUsage()).map((row) => row.id);
    expect(new Set(ids).size).toBe(2);
    expect(body).toBe(
      '{"object":"list","data":[' +
        `{"request_id":"req_acme","account":"acme","key":"acmekey00001","model":"m1","prompt_tokens":10,"completion_tokens":5,"cost":"0.1","finish_reason":"stop","error_code":null,"estimated":false,"created":"2025-04-01T00:00:00.000Z","user":null,"queue_ms":1,"first_token_ms":2,"total_ms":3,"id":"${ids[0]}"},` +
        `{"request_id":"req_beta","account":"beta","key":"betakey00001","model":"m2","prompt_tokens":10,"completion_tokens":5,"cost":"0.75","finish_reason":"stop","error_code":null,"estimated":false,"created":"2025-04-02T00:00:00.000Z","user":null,"queue_ms":1,"first_token_ms":2,"total_ms":3,"id":"${ids[1]}"}],` +
        `"has_more":false,"next_after":${JSON.stringify(JSON.parse(body).next_after)}}`,
    );
    expect(JSON.parse(await get("/admin/usage?group_by=key")).data).toEqual([
      {
        key: "acmekey00001",
        account: "acme",
        requests: 1,
        prompt_tokens: 10,
        completion_tokens: 5,
        cost: "0.1",
      },
      {
        key: "betakey00001",
        account: "beta",
        requests: 1,
        prompt_tokens: 10,
        completion_tokens: 5,
        cost: "0.75",
      },
    ]);
    expect(await get("/admin/usage?format=csv&account=beta")).toBe(
      "request_id,account,key,model,prompt_tokens,completion_tokens,cost,finish_reason,error_code,estimated,created,user,queue_ms,first_token_ms,total_ms,id\r\n" +
        `req_beta,beta,betakey00001,m2,10,5,0.75,stop,,false,2025-04-02T00:00:00.000Z,,1,2,3,${ids[1]}\r\n`,
    );
  });

  it("GET /admin/usage for one account's page reads no other account", async () => {
    await addBystanders();
    const calls = await callsOf(async () => {
      const page = JSON.parse(await get("/admin/usage?limit=1&account=acme"));
      expect(page.data.map((row: { account: string }) => row.account)).toEqual(["acme"]);
    });
    expect(calls.map((call) => call.method)).not.toContain("listAccounts");
    expect(accountsRead(calls, 3 + BYSTANDERS)).toBe(0);
  });

  it("usage (CLI) names the accounts of its rows without reading every account", async () => {
    await addBystanders();
    const out = collectOutput();
    const calls = await callsOf(() => runUsageCommand(counted.store, ["--format", "json"], out));
    expect(
      out.lines.map((line) => (line.startsWith("{") ? JSON.parse(line.replace(/,$/, "")).account : line)),
    ).toEqual(["[", "acme", "beta", "]"]);
    expect(accountsRead(calls, 3 + BYSTANDERS)).toBeLessThanOrEqual(2);
    const grouped = collectOutput();
    const groupCalls = await callsOf(() =>
      runUsageCommand(counted.store, ["--group-by", "key", "--format", "json", "--account", "beta"], grouped),
    );
    expect(grouped.lines).toEqual([
      '[{"key":"betakey00001","account":"beta","requests":1,"prompt_tokens":10,"completion_tokens":5,"cost":"0.75"}]',
    ]);
    expect(accountsRead(groupCalls, 3 + BYSTANDERS)).toBe(0);
  });

  it("GET /admin/keys answers as before and reads only the accounts its keys spend from", async () => {
    await addBystanders();
    const calls = await callsOf(async () => {
      const listed = JSON.parse(await get("/admin/keys"));
      expect(
        listed.data.map((key: { public_id: string; account: string | null }) => [key.public_id, key.account]),
      ).toEqual([
        [ADMIN_KEY, null],
        ["acmekey00001", "acme"],
        ["betakey00001", "beta"],
      ]);
    });
    expect(accountsRead(calls, 3 + BYSTANDERS)).toBeLessThanOrEqual(2);
    const filtered = await callsOf(async () =>
      expect(await get("/admin/keys?account=beta")).toBe(
        '{"object":"list","data":[{"public_id":"betakey00001","account_id":"' +
          BETA +
          '","account":"beta","role":"user","name":"ci","models":["m2"],"rpm":60,"tpm":null,"expires_at":null,"revoked_at":null,"created_at":"2025-01-03T00:00:00.000Z"}],' +
          `"has_more":false,"next_after":"${Buffer.from("keys 2025-01-03T00:00:00.000Z betakey00001").toString("base64url")}"}`,
      ),
    );
    expect(accountsRead(filtered, 3 + BYSTANDERS)).toBe(0);
  });
});

/**
 * Three accounts: acme spent 0.1 of 10 and has 0.5 reserved; beta was credited 5 and spent 0.75;
 * zeta (made in the same millisecond as beta, so listed after it by name) has 1 nano-unit
 * reserved. One key each for acme and beta, and an admin key.
 */
async function seed(store: Store): Promise<void> {
  const day = (date: string) => new Date(`${date}T00:00:00.000Z`);
  await store.insertAccount({
    id: ACME,
    name: "acme",
    balanceNano: 10_000_000_000n,
    createdAt: day("2025-01-01"),
  });
  await store.insertAccount({
    id: ZETA,
    name: "zeta",
    balanceNano: 1_500_000_000n,
    createdAt: day("2025-01-02"),
  });
  await store.insertAccount({ id: BETA, name: "beta", balanceNano: 0n, createdAt: day("2025-01-02") });
  await store.credit({
    id: "00000000-0000-4000-8000-0000000000c1",
    accountId: BETA,
    amountNano: 5_000_000_000n,
    note: undefined,
    createdAt: day("2025-01-03"),
  });
  await store.insertApiKey(makeKey({ publicId: ADMIN_KEY, role: "admin", createdAt: day("2025-01-01") }));
  await store.insertApiKey(
    makeKey({ publicId: "acmekey00001", accountId: ACME, createdAt: day("2025-01-02") }),
  );
  await store.insertApiKey(
    makeKey({
      publicId: "betakey00001",
      accountId: BETA,
      name: "ci",
      allowedModels: ["m2"],
      rpm: 60,
      createdAt: day("2025-01-03"),
    }),
  );
  const settled = [
    {
      accountId: ACME,
      key: "acmekey00001",
      model: "m1",
      amountNano: 250_000_000n,
      costNano: 100_000_000n,
      at: "2025-04-01",
      request: "req_acme",
    },
    {
      accountId: BETA,
      key: "betakey00001",
      model: "m2",
      amountNano: 1_000_000_000n,
      costNano: 750_000_000n,
      at: "2025-04-02",
      request: "req_beta",
    },
  ];
  for (const each of settled) {
    const reservation = makeReservation({
      accountId: each.accountId,
      keyPublicId: each.key,
      model: each.model,
      requestId: each.request,
      amountNano: each.amountNano,
    });
    expect(await store.reserve(reservation)).toBe("reserved");
    await store.settle(makeSettlement(reservation, each.costNano, { createdAt: day(each.at) }));
  }
  expect(await store.reserve(makeReservation({ accountId: ACME, amountNano: 500_000_000n }))).toBe(
    "reserved",
  );
  expect(await store.reserve(makeReservation({ accountId: ZETA, amountNano: 1n }))).toBe("reserved");
}

import { setImmediate } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CliError } from "../../src/admin/cli-error.ts";
import { runUsageCommand } from "../../src/admin/usage-command.ts";
import { USAGE_PAGE_ROWS } from "../../src/admin/usage-report.ts";
import { hashSecret } from "../../src/auth/api-key.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Account, Store, UsageRecord } from "../../src/store/store.ts";
import type { UsagePage } from "../../src/store/usage-query.ts";
import { makeAccount, makeReservation, makeSettlement, makeUsage } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
let store: Store;
let acme: Account;
let beta: Account;

const KEY_A = "keyacme00001";
const KEY_B = "keyacme00002";
const KEY_C = "keybeta00001";
/** Every key's secret. */
const secret = "S3cretS3cretS3cretS3cretS3cretS3cretS3cretX";

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  acme = makeAccount({ name: "acme", balanceNano: 10_000_000_000n });
  beta = makeAccount({ name: "beta", balanceNano: 10_000_000_000n });
  await store.insertAccount(acme);
  await store.insertAccount(beta);
  for (const [publicId, accountId] of [
    [KEY_A, acme.id],
    [KEY_B, acme.id],
    [KEY_C, beta.id],
  ] as const) {
    await store.insertApiKey({
      id: crypto.randomUUID(),
      publicId,
      accountId,
      role: "user",
      name: "",
      secretHash: hashSecret(secret),
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      expiresAt: undefined,
      revokedAt: undefined,
      createdAt: new Date("2025-01-01T00:00:00.000Z"),
    });
  }
  await charge(acme, KEY_A, "small", 250_000_000n, "2025-06-01T10:00:00.000Z", { requestId: "req_1" });
  await charge(acme, KEY_B, "large", 1_000_000_001n, "2025-06-01T23:59:59.999Z", {
    requestId: "req_2",
    estimated: true,
    user: "alice",
    queueMs: 4,
    firstTokenMs: 120,
    totalMs: 950,
  });
  await charge(beta, KEY_C, "small", 500_000_000n, "2025-06-02T00:00:00.000Z", { requestId: "req_3" });
  await store.insertUsage(
    makeUsage({
      accountId: acme.id,
      keyPublicId: KEY_A,
      model: "large",
      requestId: "req_4",
      promptTokens: 7,
      completionTokens: 0,
      finishReason: undefined,
      errorCode: "rate_limit_exceeded",
      queueMs: undefined,
      firstTokenMs: undefined,
      totalMs: 0,
      createdAt: new Date("2025-06-03T08:00:00.000Z"),
    }),
  );
});

afterEach(async () => {
  await store.close();
});

async function charge(
  account: Account,
  keyPublicId: string,
  model: string,
  costNano: bigint,
  createdAt: string,
  overrides: Partial<UsageRecord>,
): Promise<void> {
  const reservation = makeReservation({ accountId: account.id, keyPublicId, model, amountNano: costNano });
  expect(await store.reserve(reservation)).toBe("reserved");
  await store.settle(makeSettlement(reservation, costNano, { createdAt: new Date(createdAt), ...overrides }));
}

async function run(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runUsageCommand(store, argv, out);
  return out.lines;
}

async function runJson(...argv: string[]): Promise<unknown> {
  return JSON.parse((await run(...argv, "--format", "json")).join("\n"));
}

describe("usage --format json", () => {
  it("prints every row, oldest first, as SPEC §11 describes", async () => {
    const rows = (await runJson()) as Record<string, unknown>[];
    expect(rows.map((row) => row.request_id)).toEqual(["req_1", "req_2", "req_3", "req_4"]);
    expect(rows[1]).toEqual({
      request_id: "req_2",
      account: "acme",
      key: KEY_B,
      model: "large",
      prompt_tokens: 10,
      completion_tokens: 5,
      cost: "1.000000001",
      finish_reason: "stop",
      error_code: null,
      estimated: true,
      created: "2025-06-01T23:59:59.999Z",
      user: "alice",
      queue_ms: 4,
      first_token_ms: 120,
      total_ms: 950,
      id: (await store.listUsage()).find((row) => row.requestId === "req_2")?.id,
    });
    // Request ids may repeat; a row's id does not.
    expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length);
    expect(rows[3]).toMatchObject({
      cost: "0",
      finish_reason: null,
      error_code: "rate_limit_exceeded",
      user: null,
      queue_ms: null,
      first_token_ms: null,
      total_ms: 0,
    });
  });

  it("writes C1 controls and bidirectional overrides of a client's user escaped: the same JSON, safe to print (found by a security review)", async () => {
    await charge(beta, KEY_C, "small", 1n, "2025-06-04T00:00:00.000Z", {
      requestId: "req_c1",
      user: "\u009b31mred\u202eevil",
    });
    const lines = await run("--format", "json", "--account", "beta");
    const text = lines.join("\n");
    expect(text).toContain('"user":"\\u009b31mred\\u202eevil"');
    expect(text).not.toMatch(/[\u009b\u202e]/);
    const rows = JSON.parse(text) as { user: string | null }[];
    expect(rows.map((row) => row.user)).toContain("\u009b31mred\u202eevil");
  });

  it("filters by account name or id, key, model and time", async () => {
    const ids = async (...argv: string[]) =>
      ((await runJson(...argv)) as { request_id: string }[]).map((row) => row.request_id);
    expect(await ids("--account", "acme")).toEqual(["req_1", "req_2", "req_4"]);
    expect(await ids("--account", beta.id)).toEqual(["req_3"]);
    expect(await ids("--key", KEY_A)).toEqual(["req_1", "req_4"]);
    expect(await ids("--model", "small")).toEqual(["req_1", "req_3"]);
    expect(await ids("--since", "2025-06-02")).toEqual(["req_3", "req_4"]);
    expect(await ids("--until", "2025-06-02")).toEqual(["req_1", "req_2"]);
    expect(await ids("--since", "2025-06-01T12:00:00Z", "--until", "2025-06-02T00:00:00.001Z")).toEqual([
      "req_2",
      "req_3",
    ]);
    expect(await ids("--model", "nothing")).toEqual([]);
  });

  it("groups by day, model or key with exact totals", async () => {
    expect(await runJson("--group-by", "day")).toEqual([
      { day: "2025-06-01", requests: 2, prompt_tokens: 20, completion_tokens: 10, cost: "1.250000001" },
      { day: "2025-06-02", requests: 1, prompt_tokens: 10, completion_tokens: 5, cost: "0.5" },
      { day: "2025-06-03", requests: 1, prompt_tokens: 7, completion_tokens: 0, cost: "0" },
    ]);
    expect(await runJson("--group-by", "model", "--account", "acme")).toEqual([
      { model: "large", requests: 2, prompt_tokens: 17, completion_tokens: 5, cost: "1.000000001" },
      { model: "small", requests: 1, prompt_tokens: 10, completion_tokens: 5, cost: "0.25" },
    ]);
    expect(await runJson("--group-by", "key")).toEqual([
      { key: KEY_A, account: "acme", requests: 2, prompt_tokens: 17, completion_tokens: 5, cost: "0.25" },
      {
        key: KEY_B,
        account: "acme",
        requests: 1,
        prompt_tokens: 10,
        completion_tokens: 5,
        cost: "1.000000001",
      },
      { key: KEY_C, account: "beta", requests: 1, prompt_tokens: 10, completion_tokens: 5, cost: "0.5" },
    ]);
  });
});

describe("usage --format csv", () => {
  it("prints a header and one line per row", async () => {
    const lines = await run("--format", "csv", "--account", "acme");
    const ids = new Map((await store.listUsage()).map((row) => [row.requestId, row.id]));
    expect(lines).toEqual([
      "request_id,account,key,model,prompt_tokens,completion_tokens,cost,finish_reason,error_code,estimated,created,user,queue_ms,first_token_ms,total_ms,id",
      `req_1,acme,${KEY_A},small,10,5,0.25,stop,,false,2025-06-01T10:00:00.000Z,,1,2,3,${ids.get("req_1")}`,
      `req_2,acme,${KEY_B},large,10,5,1.000000001,stop,,true,2025-06-01T23:59:59.999Z,alice,4,120,950,${ids.get("req_2")}`,
      `req_4,acme,${KEY_A},large,7,0,0,,rate_limit_exceeded,false,2025-06-03T08:00:00.000Z,,,,0,${ids.get("req_4")}`,
    ]);
  });

  it("prints grouped totals", async () => {
    expect(await run("--format", "csv", "--group-by", "key", "--model", "small")).toEqual([
      "key,account,requests,prompt_tokens,completion_tokens,cost",
      `${KEY_A},acme,1,10,5,0.25`,
      `${KEY_C},beta,1,10,5,0.5`,
    ]);
  });

  it("quotes cells with commas and quotes", async () => {
    await store.insertUsage(
      makeUsage({ accountId: beta.id, keyPublicId: KEY_C, model: 'odd,"model"', requestId: "req_5" }),
    );
    const lines = await run("--format", "csv", "--model", 'odd,"model"');
    expect(lines[1]).toContain(`,"odd,""model""",`);
  });
});

describe("usage as a table", () => {
  it("prints rows with a total line", async () => {
    const lines = await run("--account", "acme");
    expect(lines[0]).toMatch(
      /^CREATED\s+REQUEST ID\s+ACCOUNT\s+KEY\s+MODEL\s+PROMPT\s+COMPLETION\s+COST\s+OUTCOME$/,
    );
    expect(lines[1]?.split(/\s{2,}/)).toEqual([
      "2025-06-01T10:00:00Z",
      "req_1",
      "acme",
      KEY_A,
      "small",
      "10",
      "5",
      "0.25",
      "stop",
    ]);
    expect(lines[2]).toContain("10~");
    expect(lines[3]).toContain("rate_limit_exceeded");
    expect(lines).toContain(
      "~ token counts Tollgate estimated (the engine reported none, or a count it could not have used, which was capped).",
    );
    expect(lines.at(-1)).toBe("total: 3 requests, 27 prompt and 10 completion tokens, cost 1.250000001");
  });

  it("prints grouped totals", async () => {
    const lines = await run("--group-by", "model");
    expect(lines[0]).toMatch(/^MODEL\s+REQUESTS\s+PROMPT\s+COMPLETION\s+COST$/);
    expect(lines[1]?.split(/\s{2,}/)).toEqual(["large", "2", "17", "5", "1.000000001"]);
    expect(lines[2]?.split(/\s{2,}/)).toEqual(["small", "2", "20", "10", "0.75"]);
    expect(lines.at(-1)).toBe("total: 4 requests, 37 prompt and 15 completion tokens, cost 1.750000001");
  });

  it("says when nothing matches", async () => {
    expect(await run("--model", "nothing")).toEqual(["No usage matches these filters."]);
  });
});

describe("usage of a ledger longer than a page", () => {
  const ROWS = 2 * USAGE_PAGE_ROWS + 3;
  const pages: (UsagePage | undefined)[] = [];

  beforeEach(async () => {
    for (let row = 0; row < ROWS; row += 1) {
      await store.insertUsage(
        makeUsage({
          accountId: beta.id,
          keyPublicId: KEY_C,
          model: row % 2 === 0 ? "even" : "odd",
          requestId: `bulk_${String(row).padStart(5, "0")}`,
          promptTokens: row,
          createdAt: new Date(Date.UTC(2025, 6, 1, 0, 0, row)),
        }),
      );
    }
    // Every read of rows is a bounded page: none holds the whole ledger.
    const listUsage = store.listUsage.bind(store);
    pages.length = 0;
    store.listUsage = (filter, page) => {
      pages.push(page);
      return listUsage(filter, page);
    };
  });

  const bulk = (count: number) =>
    Array.from({ length: count }, (_, row) => `bulk_${String(row).padStart(5, "0")}`);

  it("prints every row as JSON, one per line, reading a page at a time", async () => {
    const lines = await run("--format", "json", "--account", "beta", "--since", "2025-07-01");
    expect(lines).toHaveLength(ROWS + 2);
    expect(lines[0]).toBe("[");
    expect(lines[1]?.endsWith("},")).toBe(true);
    expect(lines.at(-2)?.endsWith("}")).toBe(true);
    const rows = JSON.parse(lines.join("\n")) as { request_id: string }[];
    expect(rows.map((row) => row.request_id)).toEqual(bulk(ROWS));
    expect(pages).toHaveLength(3);
    for (const page of pages) expect(page?.limit).toBeLessThanOrEqual(USAGE_PAGE_ROWS);
  });

  it("prints every row as CSV and as a table with the total of them all", async () => {
    const csv = await run("--format", "csv", "--since", "2025-07-01");
    expect(csv.slice(1).map((line) => line.split(",")[0])).toEqual(bulk(ROWS));
    const table = await run("--since", "2025-07-01", "--model", "odd");
    const odd = bulk(ROWS).filter((_, row) => row % 2 === 1);
    expect(table.slice(1, -1).map((line) => line.split(/\s{2,}/)[1])).toEqual(odd);
    const oddTokens = odd.reduce((sum, _, index) => sum + 2 * index + 1, 0);
    expect(table.at(-1)).toBe(
      `total: ${odd.length} requests, ${oddTokens} prompt and ${5 * odd.length} completion tokens, cost 0`,
    );
    // Columns stay aligned across pages where no later cell is wider.
    expect(new Set(table.slice(1, -1).map((line) => line.indexOf(KEY_C))).size).toBe(1);
    for (const page of pages) expect(page?.limit).toBeLessThanOrEqual(USAGE_PAGE_ROWS);
  });

  it("stops reading pages once the reader has gone (`usage | head`), in every format", async () => {
    for (const format of ["json", "csv", "table"]) {
      pages.length = 0;
      // A reader that goes after the first lines, as `head` closes the pipe.
      const lines: string[] = [];
      const out = {
        write: (line: string) => void lines.push(line),
        get closed() {
          return lines.length >= 3;
        },
      };
      await runUsageCommand(store, ["--format", format, "--since", "2025-07-01"], out);
      expect(pages, format).toHaveLength(1);
      expect(lines.length, format).toBeGreaterThanOrEqual(3);
    }
  });

  it("reads the next page only once the reader has taken the last (a slow pipe), in every format", async () => {
    for (const format of ["json", "csv", "table"]) {
      pages.length = 0;
      const lines: string[] = [];
      // Pages read by the time each wait for the reader began.
      const readWhenWaiting: number[] = [];
      const out = {
        write: (line: string) => void lines.push(line),
        drained: async () => {
          readWhenWaiting.push(pages.length);
          await setImmediate();
        },
      };
      await runUsageCommand(store, ["--format", format, "--since", "2025-07-01"], out);
      expect(readWhenWaiting, format).toEqual([1, 2, 3]);
      expect(lines.length, format).toBeGreaterThan(ROWS);
    }
  });

  it("totals groups in the store, without reading rows", async () => {
    expect(await runJson("--group-by", "model", "--since", "2025-07-01")).toEqual([
      {
        model: "even",
        requests: USAGE_PAGE_ROWS + 2,
        prompt_tokens: (USAGE_PAGE_ROWS + 1) * (USAGE_PAGE_ROWS + 2),
        completion_tokens: 5 * (USAGE_PAGE_ROWS + 2),
        cost: "0",
      },
      {
        model: "odd",
        requests: USAGE_PAGE_ROWS + 1,
        prompt_tokens: (USAGE_PAGE_ROWS + 1) * (USAGE_PAGE_ROWS + 1),
        completion_tokens: 5 * (USAGE_PAGE_ROWS + 1),
        cost: "0",
      },
    ]);
    expect(pages).toEqual([]);
  });
});

describe("usage --key", () => {
  it("takes a whole key by its public id, as keys revoke does", async () => {
    const rows = (await runJson("--key", `sk-tg-${KEY_A}-${secret}`)) as { request_id: string }[];
    expect(rows.map((row) => row.request_id)).toEqual(["req_1", "req_4"]);
  });

  it.each([
    ["an unknown whole key, naming only its public id", `sk-tg-zzzzzzzzzzzz-${secret}`, /"zzzzzzzzzzzz"/],
    ["a mistyped key", `sk-tg-keyacme0001-${secret}`, /Name the key by its public id/],
    ["a secret alone", secret, /Name the key by its public id/],
    ["a whole key with another secret", `sk-tg-${KEY_A}-${secret.slice(0, -1)}Y`, /its secret differs/],
  ])("refuses %s without repeating the secret", async (_case, key, message) => {
    const error = await run("--key", key).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain(secret);
  });
});

describe("usage --help", () => {
  it("prints the usage wherever it stands, instead of refusing it", async () => {
    for (const argv of [["--account", "x", "--help"], ["--format", "json", "-h"], ["help"]]) {
      expect(await run(...argv)).toEqual([expect.stringMatching(/^Usage: tollgate usage \[--account/)]);
    }
  });
});

describe("usage refuses", () => {
  it.each([
    ["an unknown account", ["--account", "nobody"], /No account has the name or id "nobody". List accounts/],
    ["an unknown key", ["--key", "zzzzzzzzzzzz"], /No key has the public id "zzzzzzzzzzzz"/],
    ["a bad --since", ["--since", "yesterday"], /^--since: "yesterday" is not an ISO 8601 date/],
    ["an --until without zone", ["--until", "2025-06-01T10:00"], /^--until: .*has no time zone; add one/],
    [
      "--since after --until",
      ["--since", "2025-06-02", "--until", "2025-06-01"],
      /^--since must be before --until \(--until is exclusive\)\.$/,
    ],
    ["a bad grouping", ["--group-by", "week"], /--group-by must be day, model, key, not 'week'/],
    ["a bad format", ["--format", "xml"], /--format must be table, json, csv, not 'xml'/],
    ["a positional", ["acme"], /Unexpected argument 'acme'/],
  ])("%s with a CliError", async (_case, argv, message) => {
    const error = await run(...argv).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toMatch(message);
  });
});

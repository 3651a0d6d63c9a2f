import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { OPTIMIZE_EVERY_MS } from "../../src/store/sqlite/open-sqlite-store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** The shape of GET /admin/usage?account=..&model=.. (listUsage with both filters, one page). */
const USAGE_OF_ACCOUNT_AND_MODEL =
  "select * from usage where account_id = ? and model = ? order by created_at, id limit ?";

/**
 * Writes usage rows straight into the file, as a server's settles would have: `rows` rows
 * (numbered from `firstRow`) spread over `accounts` accounts (made with the first rows) and five
 * models. Through a connection of its own.
 */
function writeUsage(file: string, options: { accounts: number; rows: number; firstRow?: number }): void {
  const firstRow = options.firstRow ?? 0;
  const database = new DatabaseSync(file, { timeout: 5000 });
  try {
    const insertAccount = database.prepare(
      "insert into accounts (id, name, balance_nano, reserved_nano, spent_nano, created_at) values (?, ?, 0, 0, 0, ?)",
    );
    const insertUsage = database.prepare(
      `insert into usage (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens,
        cost_nano, finish_reason, error_code, "user", queue_ms, first_token_ms, total_ms, estimated, created_at)
       values (?, ?, ?, 'key', ?, 1, 1, 1, 'stop', null, null, 0, 0, 0, 0, ?)`,
    );
    database.exec("begin immediate");
    if (firstRow === 0) {
      for (let account = 0; account < options.accounts; account += 1) {
        insertAccount.run(accountId(account), accountId(account), "2025-01-01T00:00:00.000Z");
      }
    }
    for (let row = firstRow; row < firstRow + options.rows; row += 1) {
      const createdAt = new Date(Date.UTC(2025, 0, 2) + row * 1000).toISOString();
      insertUsage.run(
        `usage-${row}`,
        `request-${row}`,
        accountId(row % options.accounts),
        `model-${row % 5}`,
        createdAt,
      );
    }
    database.exec("commit");
  } finally {
    database.close();
  }
}

function accountId(index: number): string {
  return `account-${String(index).padStart(6, "0")}`;
}

/** How a new connection to the file (which reads the file's statistics) would run the query. */
function planOfUsageQuery(file: string): string {
  const database = new DatabaseSync(file);
  try {
    const steps = database
      .prepare(`explain query plan ${USAGE_OF_ACCOUNT_AND_MODEL}`)
      .all(accountId(7), "model-2", 100);
    return steps.map((step) => String(step.detail)).join("; ");
  } finally {
    database.close();
  }
}

/** The usage table's rows as `sqlite_stat1` counted them; `undefined` while it is not analyzed. */
function analyzedUsageRows(file: string): number | undefined {
  const database = new DatabaseSync(file);
  try {
    const table = database.prepare("select 1 from sqlite_schema where name = 'sqlite_stat1'").get();
    if (table === undefined) return undefined;
    const row = database.prepare("select stat from sqlite_stat1 where tbl = 'usage' limit 1").get();
    return row === undefined ? undefined : Number(String(row.stat).split(" ")[0]);
  } finally {
    database.close();
  }
}

async function makeFile(): Promise<string> {
  const url = newDatabaseUrl(directory);
  // A CLI command creates and migrates the file.
  await (await openStore(url)).close();
  return url;
}

const fileOf = (url: string) => url.slice("sqlite:".length);

describe("planner statistics of the server's SQLite file", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("without them, finds an account's rows of one model by walking the model's rows", async () => {
    const url = await makeFile();
    writeUsage(fileOf(url), { accounts: 200, rows: 10_000 });
    expect(planOfUsageQuery(fileOf(url))).toContain("USING INDEX usage_model_created_at_index");
  });

  it("analyzes a file that already has rows when the server opens it (regression: 1 s usage reports)", async () => {
    const url = await makeFile();
    writeUsage(fileOf(url), { accounts: 200, rows: 10_000 });
    const server = await openStore(url, { owner: true });
    try {
      expect(analyzedUsageRows(fileOf(url))).toBe(10_000);
      expect(planOfUsageQuery(fileOf(url))).toContain("USING INDEX usage_account_id_created_at_index");
    } finally {
      await server.close();
    }
  });

  it("analyzes a file that starts empty once its tables fill, on the periodic run", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const url = await makeFile();
    const server = await openStore(url, { owner: true });
    try {
      // Empty tables are left unanalyzed: statistics of no rows would mislead the planner later.
      expect(analyzedUsageRows(fileOf(url))).toBeUndefined();
      writeUsage(fileOf(url), { accounts: 200, rows: 10_000 });
      await vi.advanceTimersByTimeAsync(OPTIMIZE_EVERY_MS);
      // Queued behind the run on the server's connection: it is over once this answers.
      await server.hasAccounts();
      expect(analyzedUsageRows(fileOf(url))).toBe(10_000);
      expect(planOfUsageQuery(fileOf(url))).toContain("USING INDEX usage_account_id_created_at_index");
    } finally {
      await server.close();
    }
  });

  it("analyzes again when a table has grown tenfold since", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const url = await makeFile();
    writeUsage(fileOf(url), { accounts: 20, rows: 100 });
    const server = await openStore(url, { owner: true });
    try {
      expect(analyzedUsageRows(fileOf(url))).toBe(100);
      writeUsage(fileOf(url), { accounts: 20, rows: 1_000, firstRow: 100 });
      await vi.advanceTimersByTimeAsync(OPTIMIZE_EVERY_MS);
      await server.hasAccounts();
      expect(analyzedUsageRows(fileOf(url))).toBe(1_100);
    } finally {
      await server.close();
    }
  });

  it("analyzes before it closes", async () => {
    const url = await makeFile();
    const server = await openStore(url, { owner: true });
    writeUsage(fileOf(url), { accounts: 200, rows: 10_000 });
    await server.close();
    expect(analyzedUsageRows(fileOf(url))).toBe(10_000);
  });

  it("leaves the statistics to the server: a CLI command does not analyze", async () => {
    const url = await makeFile();
    writeUsage(fileOf(url), { accounts: 200, rows: 10_000 });
    const command = await openStore(url);
    await command.listAccounts();
    await command.close();
    expect(analyzedUsageRows(fileOf(url))).toBeUndefined();
  });
});

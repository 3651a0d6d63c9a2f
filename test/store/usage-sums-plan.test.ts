/**
 * The plans of sumUsage's windows (see src/store/usage-sum-window.ts): each window must read its
 * own rows through the (created_at, id) index. Two plans read the whole ledger per window
 * instead, which made a report cost the square of the ledger (a minute for 2 million rows):
 * PostgreSQL misjudged the two row-value bounds and scanned the table; SQLite walked the index on
 * (key_public_id, created_at) or (model, created_at) to have its groups in order.
 *
 * The windows run as the store runs them (createKyselyBilling over a kysely that logs its
 * queries), on ledgers of a few windows; the test explains each window's query with the
 * parameters it ran with. Plans, not durations: the machine is shared.
 */
import { DatabaseSync } from "node:sqlite";
import { type CompiledQuery, Kysely, PostgresDialect, SqliteDialect } from "kysely";
import { Pool } from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { createKyselyBilling } from "../../src/store/kysely-billing.ts";
import { openStore } from "../../src/store/open-store.ts";
import { openNodeSqliteDatabase } from "../../src/store/sqlite/node-sqlite-database.ts";
import type { UsageGrouping, UsageTotals } from "../../src/store/usage-query.ts";
import { POSTGRES_SUM_WINDOW_ROWS, SUM_WINDOW_ROWS } from "../../src/store/usage-sum-window.ts";
import { createPostgresTestSchema, runStatements, testPostgresUrl } from "./postgres-test-database.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

/** Usage rows in each ledger: three windows of 10,000 rows (the first and last with one bound). */
const ROWS = 25_000;
const KEYS = 500;
const MODELS = 5;
const ACCOUNT_ID = "account-1";
const INDEX = "usage_created_at_id_index";

/** Every grouping, and none (the totals), each with its name in the tests' titles. */
const GROUPINGS: [string, UsageGrouping | undefined][] = [
  ["nothing", undefined],
  ["day", "day"],
  ["model", "model"],
  ["key", "key"],
];

const directory = makeTemporaryDirectory();
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A kysely that keeps the queries that sum a window (the only ones that count rows). */
function recordingWindowQueries(): {
  queries: CompiledQuery[];
  log: (event: { query: CompiledQuery }) => void;
} {
  const queries: CompiledQuery[] = [];
  return {
    queries,
    log: (event) => {
      if (event.query.sql.includes("count(*)")) queries.push(event.query);
    },
  };
}

/** What the ledger {@link fillSqlite} and {@link fillPostgres} write sums to. */
function expectTotals(totals: UsageTotals[], grouping: UsageGrouping | undefined): void {
  const groups = { day: 1, model: MODELS, key: KEYS, none: 1 }[grouping ?? "none"];
  expect(totals).toHaveLength(groups);
  expect(totals.reduce((sum, each) => sum + each.requests, 0)).toBe(ROWS);
  expect(totals.reduce((sum, each) => sum + each.costNano, 0n)).toBe(3n * BigInt(ROWS));
}

/**
 * Row `row` of the ledger: a second apart, on one day, a key and a model each, numbered so that
 * neither the keys nor the models come in the ledger's order.
 */
function usageValues(row: number): [string, string, string, string] {
  const createdAt = new Date(Date.UTC(2025, 0, 1) + row * 1000).toISOString();
  return [
    `usage-${String(row).padStart(6, "0")}`,
    `key${String(row % KEYS).padStart(9, "0")}`,
    `m${row % MODELS}`,
    createdAt,
  ];
}

describe("the windows of sumUsage on SQLite", () => {
  /** A migrated file with the ledger, written straight into it. */
  async function fillSqlite(): Promise<string> {
    const url = newDatabaseUrl(directory);
    const store = await openStore(url);
    await store.close();
    const file = url.slice("sqlite:".length);
    const database = new DatabaseSync(file);
    try {
      database.exec("begin");
      database
        .prepare(
          "insert into accounts (id, name, balance_nano, reserved_nano, spent_nano, created_at) values (?, ?, 0, 0, 0, ?)",
        )
        .run(ACCOUNT_ID, ACCOUNT_ID, "2025-01-01T00:00:00.000Z");
      const insert = database.prepare(
        `insert into usage (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens,
          cost_nano, total_ms, created_at) values (?1, ?1, ?2, ?3, ?4, 2, 1, 3, 0, ?5)`,
      );
      for (let row = 0; row < ROWS; row += 1) {
        const [id, key, model, createdAt] = usageValues(row);
        insert.run(id, ACCOUNT_ID, key, model, createdAt);
      }
      database.exec("commit");
    } finally {
      database.close();
    }
    return file;
  }

  /** What SQLite does for each window query, one line a step. */
  function plansOf(file: string, queries: CompiledQuery[]): string[] {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      return queries.map((query) =>
        database
          .prepare(`explain query plan ${query.sql}`)
          .all(...(query.parameters as string[]))
          .map((step) => String(step.detail))
          .join("\n"),
      );
    } finally {
      database.close();
    }
  }

  async function sumWindows(file: string, grouping: UsageGrouping | undefined) {
    const recording = recordingWindowQueries();
    const db = new Kysely<Database>({
      dialect: new SqliteDialect({ database: openNodeSqliteDatabase(file) }),
      log: recording.log,
    });
    try {
      const totals = await createKyselyBilling(db).sumUsage({}, grouping);
      return { totals, plans: plansOf(file, recording.queries) };
    } finally {
      await db.destroy();
    }
  }

  for (const statistics of ["without the planner's statistics", "after ANALYZE"]) {
    it.each(GROUPINGS)(
      `reads each window through ${INDEX}, ${statistics} (grouped by %s)`,
      async (_name, grouping) => {
        const file = await fillSqlite();
        if (statistics === "after ANALYZE") {
          const database = new DatabaseSync(file);
          database.exec("analyze");
          database.close();
        }
        const { totals, plans } = await sumWindows(file, grouping);
        expectTotals(totals, grouping);
        expect(plans).toHaveLength(3);
        for (const plan of plans) {
          // A SEARCH of a range of the index: not a SCAN of the table or of another index.
          expect(plan).toMatch(new RegExp(`^SEARCH usage USING (COVERING )?INDEX ${INDEX} \\(`));
          expect(plan).not.toMatch(/SCAN usage/);
        }
      },
    );
  }
});

// Top-level await: whether PostgreSQL is there decides whether these tests run.
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL plans of sumUsage: ${probe.skipped}.`);
else await probe.drop();

/** A node of PostgreSQL's plan, as `explain (format json)` answers it. */
interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

function* nodesOf(node: PlanNode): Generator<PlanNode> {
  yield node;
  for (const child of node.Plans ?? []) yield* nodesOf(child);
}

(("skipped" in probe ? describe.skip : describe) as typeof describe)(
  "the windows of sumUsage on PostgreSQL",
  () => {
    /** A migrated schema with the ledger and fresh statistics; answers its name. */
    async function fillPostgres(): Promise<string> {
      const created = await createPostgresTestSchema();
      if ("skipped" in created) throw new Error(created.skipped);
      cleanups.push(() => created.drop());
      const store = await openStore(created.url);
      await store.close();
      await runStatements(testPostgresUrl(), [
        `set search_path to ${created.schema}`,
        `insert into accounts (id, name, balance_nano, reserved_nano, spent_nano, created_at)
        values ('${ACCOUNT_ID}', '${ACCOUNT_ID}', 0, 0, 0, '2025-01-01T00:00:00.000Z')`,
        // The rows of usageValues.
        `insert into usage (id, request_id, account_id, key_public_id, model, prompt_tokens, completion_tokens,
          cost_nano, total_ms, created_at)
        select 'usage-' || lpad(row::text, 6, '0'), 'usage-' || lpad(row::text, 6, '0'), '${ACCOUNT_ID}',
          'key' || lpad((row % ${KEYS})::text, 9, '0'), 'm' || (row % ${MODELS}), 2, 1, 3, 0,
          to_char(timestamp '2025-01-01' + row * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        from generate_series(0, ${ROWS - 1}) as row`,
        "analyze",
      ]);
      return created.schema;
    }

    async function sumWindows(schema: string, grouping: UsageGrouping | undefined, sumWindowRows?: number) {
      const recording = recordingWindowQueries();
      const pool = new Pool({
        connectionString: testPostgresUrl(),
        options: `-c search_path=${schema}`,
        max: 1,
      });
      const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: recording.log });
      try {
        const options = sumWindowRows === undefined ? { lockRows: true } : { lockRows: true, sumWindowRows };
        const totals = await createKyselyBilling(db, options).sumUsage({}, grouping);
        const plans: PlanNode[] = [];
        for (const query of recording.queries) {
          const explained = await pool.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
            `explain (format json) ${query.sql}`,
            query.parameters as unknown[],
          );
          plans.push(explained.rows[0]!["QUERY PLAN"][0].Plan);
        }
        return { totals, plans };
      } finally {
        await db.destroy();
      }
    }

    it.each(GROUPINGS)(`reads each window through ${INDEX} (grouped by %s)`, async (_name, grouping) => {
      const schema = await fillPostgres();
      const { totals, plans } = await sumWindows(schema, grouping);
      expectTotals(totals, grouping);
      expect(plans).toHaveLength(3);
      for (const plan of plans) {
        const reads = [...nodesOf(plan)].filter((node) => node["Relation Name"] === "usage");
        expect(reads.length).toBeGreaterThan(0);
        for (const read of reads) {
          // An index scan (or a bitmap of one) of the window's range, never a sequential scan.
          expect(read["Node Type"]).not.toMatch(/Seq Scan/);
        }
        const indexes = [...nodesOf(plan)]
          .map((node) => node["Index Name"])
          .filter((name) => name !== undefined);
        expect(indexes).toEqual([INDEX]);
      }
    });

    it("sums in windows of the size it is given (a PostgreSQL store's are larger)", async () => {
      expect(POSTGRES_SUM_WINDOW_ROWS).toBeGreaterThan(SUM_WINDOW_ROWS);
      const schema = await fillPostgres();
      const { totals, plans } = await sumWindows(schema, "key", 20_000);
      expectTotals(totals, "key");
      // A window of most of this small ledger may be a sequential scan: of a few windows at most,
      // never one per 10,000 rows.
      expect(plans).toHaveLength(2);
    });
  },
);

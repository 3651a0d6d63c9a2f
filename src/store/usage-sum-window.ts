import { type SelectQueryBuilder, sql } from "kysely";
import type { Database } from "./database.ts";
import type { UsageGrouping } from "./usage-query.ts";

/**
 * How the usage ledger is summed (`Store.sumUsage`): in windows of rows along the
 * (created_at, id) index (`usage_created_at_id_index`), one query per window, with a turn of the
 * event loop between them. On SQLite a query blocks the event loop, and grouping a whole ledger
 * at once (a sort of every row) would hold every request in flight for seconds.
 *
 * A window is only as cheap as the plan that reads it: each must read its own rows through that
 * index and no others, or the report costs the ledger's size once per window (its square in
 * all). Two plans did otherwise, on 2 million rows:
 * - PostgreSQL estimates a row-value comparison like a bound on its first column alone, and does
 *   not see that two of them (after, up to) make a narrow range: it took a window for a quarter
 *   of the table and read all of it (a parallel sequential scan, 0.7 s a window, a minute in
 *   all). Each bound is therefore written twice: the row value, which is exact, and a bound on
 *   `created_at` alone, which changes no result (it holds for every row in the window) but is a
 *   range the planner estimates from its statistics, and which walks the index. (Rows in the
 *   millisecond of a bound are read by both windows beside it, and the row value tells them apart.)
 * - SQLite grouped by key or model by walking the whole index on (key_public_id, created_at) or
 *   (model, created_at), which hands out rows already in groups and spares a sort, instead of
 *   reading the window's 10,000 rows (0.5 to 1 s a window, with the event loop blocked). The
 *   groups are therefore expressions that no index holds (`model || ''`), which leaves the
 *   planner no order to gain from another index.
 *
 * Test: `test/store/usage-sums-plan.test.ts` asserts both plans.
 */

/** A position in the usage ledger, as its columns hold it. */
export interface UsageCursorRow {
  created_at: string;
  id: string;
}

/** The rows of one window: after `after` (from the first row without it), up to `end` inclusive (to the last row without it). */
export interface UsageWindow {
  after: UsageCursorRow | undefined;
  end: UsageCursorRow | undefined;
}

/**
 * How many usage rows `Store.sumUsage` totals per query: on SQLite with 2 million rows, 3-15 ms
 * a window without a grouping or by day, 40-60 ms by key (thousands of groups a window).
 */
export const SUM_WINDOW_ROWS = 10_000;

/**
 * How many usage rows a PostgreSQL store totals per query. Its queries do not block the event
 * loop, so its windows only bound each statement (well inside `statement_timeout`) and what one
 * window's groups cost to read and merge. On 2 million rows in `created_at` order (2026-11-27),
 * by key (50,000 keys): 10.5 s in windows of 10,000 rows, 6.1 s at 100,000, 4.6 s at 250,000,
 * 0.74 s for one `group by` in psql; without a grouping, by day or by model 1.5-2.7 s at any of
 * these sizes. A window of 250,000 rows is a bitmap scan of the index, about 0.4 s.
 */
export const POSTGRES_SUM_WINDOW_ROWS = 250_000;

/** Narrows a query of usage rows to one window (see the module comment for why each bound is written twice). */
export function whereInWindow<Output>(
  query: SelectQueryBuilder<Database, "usage", Output>,
  window: UsageWindow,
): SelectQueryBuilder<Database, "usage", Output> {
  const { after, end } = window;
  let narrowed = query;
  if (after !== undefined) {
    narrowed = narrowed
      .where("created_at", ">=", after.created_at)
      .where((eb) => eb(eb.refTuple("created_at", "id"), ">", eb.tuple(after.created_at, after.id)));
  }
  if (end !== undefined) {
    narrowed = narrowed
      .where("created_at", "<=", end.created_at)
      .where((eb) => eb(eb.refTuple("created_at", "id"), "<=", eb.tuple(end.created_at, end.id)));
  }
  return narrowed;
}

/**
 * What usage rows are grouped by: timestamps are ISO 8601 text, so a day is its first 10
 * characters. Model and key are appended `''` (the same text, never null: both columns are
 * `not null`), so that no index matches the grouping (see the module comment); SQLite's own way
 * to say so, a unary `+`, is not defined on text in PostgreSQL.
 */
export function groupExpression(grouping: UsageGrouping) {
  switch (grouping) {
    case "day":
      return sql<string>`substr(created_at, 1, 10)`;
    case "model":
      return sql<string>`model || ''`;
    case "key":
      return sql<string>`key_public_id || ''`;
    default: {
      const unexpected: never = grouping;
      throw new Error(`Unknown grouping ${String(unexpected)}`);
    }
  }
}

import { setImmediate } from "node:timers/promises";
import { type Kysely, type SelectQueryBuilder, sql } from "kysely";
import { toUsageRecord } from "./billing-rows.ts";
import { readBigInt, requirePageLimit, toTimestampText } from "./column-values.ts";
import type { Database } from "./database.ts";
import { exactSumOf, readExactSum } from "./exact-money-sum.ts";
import type { UsageRecord } from "./store.ts";
import type { UsageFilter, UsageGrouping, UsagePage, UsageTotals } from "./usage-query.ts";
import { groupExpression, type UsageCursorRow, whereInWindow } from "./usage-sum-window.ts";

/**
 * {@link Store.listUsage} on kysely; `horizon`: a page holds only rows stamped before it
 * (PostgreSQL's, see postgres/usage-stamps.ts).
 */
export async function listUsage(
  db: Kysely<Database>,
  filter: UsageFilter = {},
  page?: UsagePage,
  horizon?: string,
): Promise<UsageRecord[]> {
  let query = whereUsageMatches(db.selectFrom("usage").selectAll(), filter);
  if (horizon !== undefined) query = query.where("created_at", "<", horizon);
  if (page !== undefined) {
    const limit = requirePageLimit(page.limit, "row");
    const after = page.after;
    query = whereAfter(
      query,
      after === undefined ? undefined : { created_at: toTimestampText(after.createdAt), id: after.id },
    ).limit(limit);
  }
  const rows = await query.orderBy("created_at").orderBy("id").execute();
  return rows.map(toUsageRecord);
}

/** {@link Store.sumUsage} on kysely, summing `sumWindowRows` usage rows per query. */
export async function sumUsage(
  db: Kysely<Database>,
  sumWindowRows: number,
  filter: UsageFilter = {},
  grouping?: UsageGrouping,
): Promise<UsageTotals[]> {
  // In windows of rows along the (created_at, id) index, yielding between them: see
  // usage-sum-window.ts, which also says how each window's query is kept to its own rows.
  const group = grouping === undefined ? sql<string>`''` : groupExpression(grouping);
  const sums = new Map<string, UsageTotals>();
  let after: UsageCursorRow | undefined;
  for (;;) {
    const end = await whereAfter(
      whereUsageMatches(db.selectFrom("usage").select(["created_at", "id"]), filter),
      after,
    )
      .orderBy("created_at")
      .orderBy("id")
      .offset(sumWindowRows - 1)
      .limit(1)
      .executeTakeFirst();
    let query = whereInWindow(
      whereUsageMatches(
        db.selectFrom("usage").select([
          group.as("usage_group"),
          // A key spends from one account: any of its rows names it.
          sql<string | null>`min(account_id)`.as("account_id"),
          sql<bigint>`count(*)`.as("requests"),
          sumOf("prompt_tokens").as("prompt_tokens"),
          sumOf("completion_tokens").as("completion_tokens"),
          ...exactSumOf("cost_nano"),
        ]),
        filter,
      ),
      { after, end },
    );
    if (grouping !== undefined) query = query.groupBy(group);
    for (const row of await query.execute()) {
      const requests = Number(readBigInt(row.requests));
      if (requests === 0) continue;
      let totals = sums.get(row.usage_group);
      if (totals === undefined) {
        const accountId = grouping === "key" && row.account_id !== null ? row.account_id : undefined;
        totals = noUsage(row.usage_group, accountId);
        sums.set(row.usage_group, totals);
      }
      totals.requests += requests;
      totals.promptTokens += Number(readBigInt(row.prompt_tokens));
      totals.completionTokens += Number(readBigInt(row.completion_tokens));
      totals.costNano += readExactSum(row);
    }
    if (end === undefined) break;
    after = end;
    await setImmediate();
  }
  if (grouping === undefined && sums.size === 0) return [noUsage("", undefined)];
  return [...sums.values()];
}

/** Narrows a query of usage rows to those that match the filter. */
function whereUsageMatches<Output>(
  query: SelectQueryBuilder<Database, "usage", Output>,
  filter: UsageFilter,
): SelectQueryBuilder<Database, "usage", Output> {
  let narrowed = query;
  if (filter.accountId !== undefined) narrowed = narrowed.where("account_id", "=", filter.accountId);
  if (filter.keyPublicId !== undefined) narrowed = narrowed.where("key_public_id", "=", filter.keyPublicId);
  if (filter.model !== undefined) narrowed = narrowed.where("model", "=", filter.model);
  if (filter.since !== undefined)
    narrowed = narrowed.where("created_at", ">=", toTimestampText(filter.since));
  if (filter.until !== undefined) narrowed = narrowed.where("created_at", "<", toTimestampText(filter.until));
  return narrowed;
}

function noUsage(group: string, accountId: string | undefined): UsageTotals {
  return { group, accountId, requests: 0, promptTokens: 0, completionTokens: 0, costNano: 0n };
}

/**
 * Narrows a query of usage rows to those after a position in (created_at, id) order: a row
 * value, so that both databases walk the (created_at, id) index from there.
 */
function whereAfter<Output>(
  query: SelectQueryBuilder<Database, "usage", Output>,
  after: UsageCursorRow | undefined,
): SelectQueryBuilder<Database, "usage", Output> {
  if (after === undefined) return query;
  return query.where((eb) => eb(eb.refTuple("created_at", "id"), ">", eb.tuple(after.created_at, after.id)));
}

/**
 * `sum(column)` as a `bigint` that is 0 over no rows, for counts far from 2^63 (tokens). The cast
 * matters on PostgreSQL, where the sum of a `bigint` column is a `numeric` (and overflow then
 * fails loudly, as SQLite's `sum` does). Money goes through {@link exactSumOf}.
 */
function sumOf(column: string) {
  return sql<bigint>`cast(coalesce(sum(${sql.ref(column)}), 0) as bigint)`;
}

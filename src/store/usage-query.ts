/**
 * What {@link Store.listUsage} and {@link Store.sumUsage} are asked for: the rows' filters, a page
 * of them, and how totals are grouped (store.ts).
 */

/** Filters of {@link Store.listUsage}; every bound is optional. */
export interface UsageFilter {
  accountId?: string;
  keyPublicId?: string;
  model?: string;
  /** Rows created at or after this instant. */
  since?: Date;
  /** Rows created before this instant (exclusive). */
  until?: Date;
}

/** Where a page of {@link Store.listUsage} starts: after the row with this time and id. */
export interface UsageCursor {
  createdAt: Date;
  id: string;
}

/** One page of {@link Store.listUsage}: at most `limit` rows (at least 1), after `after`. */
export interface UsagePage {
  limit: number;
  after?: UsageCursor | undefined;
}

/** How {@link Store.sumUsage} groups: by day (UTC), model or key. */
export const USAGE_GROUPINGS = ["day", "model", "key"] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** The totals of the usage rows of one group (or of all matching rows). */
export interface UsageTotals {
  /** The day (`2025-06-01`, UTC), the model id or the key's public id; `""` for all rows. */
  group: string;
  /** The key's account when grouping by key (a key spends from one account), else `undefined`. */
  accountId: string | undefined;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costNano: bigint;
}

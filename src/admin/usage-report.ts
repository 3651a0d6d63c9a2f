import { formatAmount } from "../billing/money.ts";
import type { Store, UsageFilter, UsageRecord } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { findAccount } from "./find-account.ts";
import { parseInstant } from "./parse-instant.ts";

/** How `usage` may group its rows. */
export const USAGE_GROUPINGS = ["day", "model", "key"] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** The filters of `usage` and `GET /admin/usage`, as the operator wrote them. */
export interface UsageQuery {
  /** An account name or id. */
  account?: string | undefined;
  /** A key's public id. */
  key?: string | undefined;
  model?: string | undefined;
  /** ISO 8601: rows at or after this instant. */
  since?: string | undefined;
  /** ISO 8601: rows before this instant. */
  until?: string | undefined;
}

/** One usage row as `usage --format json` prints it (SPEC §11). */
export interface UsageRow {
  /** The request's `x-request-id`. */
  request_id: string;
  /** The account's name. */
  account: string;
  /** The key's public id. */
  key: string;
  model: string;
  prompt_tokens: number;
  completion_tokens: number;
  /** Decimal string in the account currency. */
  cost: string;
  finish_reason: string | null;
  error_code: string | null;
  /** True when Tollgate counted the tokens itself. */
  estimated: boolean;
  /** ISO 8601 UTC. */
  created: string;
}

/** The totals of one group of usage rows. */
export interface UsageGroup {
  /** The day (`2025-06-01`, UTC), the model id or the key's public id. */
  group: string;
  /** The account's name when grouping by key (a key spends from one account), else `undefined`. */
  account: string | undefined;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costNano: bigint;
}

/** What a usage query found: the rows oldest first, with the account names they refer to. */
export interface UsageReport {
  records: UsageRecord[];
  /** Account names by id. */
  accountNames: Map<string, string>;
}

/**
 * Resolves the operator's filters and reads the matching rows. Throws an {@link AdminError}:
 * `not_found` for an unknown account or key, `invalid_value` for an instant that is not ISO 8601
 * or a `since` not before `until`.
 */
export async function queryUsage(store: Store, query: UsageQuery): Promise<UsageReport> {
  const filter: UsageFilter = {};
  if (query.account !== undefined) {
    const account = await findAccount(store, query.account);
    if (account === undefined) {
      throw new AdminError("not_found", `No account has the name or id ${JSON.stringify(query.account)}.`, {
        field: "account",
      });
    }
    filter.accountId = account.id;
  }
  if (query.key !== undefined) {
    if ((await store.getApiKeyByPublicId(query.key)) === undefined) {
      throw new AdminError("not_found", `No key has the public id ${JSON.stringify(query.key)}.`, {
        field: "key",
      });
    }
    filter.keyPublicId = query.key;
  }
  if (query.model !== undefined) filter.model = query.model;
  if (query.since !== undefined) filter.since = readInstant("since", query.since);
  if (query.until !== undefined) filter.until = readInstant("until", query.until);
  if (filter.since !== undefined && filter.until !== undefined && filter.since >= filter.until) {
    throw new AdminError("invalid_value", "since must be before until (until is exclusive).", {
      field: "since",
    });
  }
  const [records, accounts] = await Promise.all([store.listUsage(filter), store.listAccounts()]);
  return { records, accountNames: new Map(accounts.map((account) => [account.id, account.name])) };
}

function readInstant(field: "since" | "until", text: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new AdminError("invalid_value", `${field}: ${reason}`, { field, cause: error });
  }
}

/** The rows of a report as `usage --format json` prints them. */
export function renderUsageRows(report: UsageReport): UsageRow[] {
  return report.records.map((record) => ({
    request_id: record.requestId,
    account: report.accountNames.get(record.accountId) ?? record.accountId,
    key: record.keyPublicId,
    model: record.model,
    prompt_tokens: record.promptTokens,
    completion_tokens: record.completionTokens,
    cost: formatAmount(record.costNano),
    finish_reason: record.finishReason ?? null,
    error_code: record.errorCode ?? null,
    estimated: record.estimated,
    created: record.createdAt.toISOString(),
  }));
}

/** Totals per day (UTC), model or key, in ascending order of the group. */
export function groupUsage(report: UsageReport, grouping: UsageGrouping): UsageGroup[] {
  const groups = new Map<string, UsageGroup>();
  for (const record of report.records) {
    const group = groupOf(record, grouping);
    let totals = groups.get(group);
    if (totals === undefined) {
      totals = {
        group,
        account:
          grouping === "key" ? (report.accountNames.get(record.accountId) ?? record.accountId) : undefined,
        requests: 0,
        promptTokens: 0,
        completionTokens: 0,
        costNano: 0n,
      };
      groups.set(group, totals);
    }
    totals.requests += 1;
    totals.promptTokens += record.promptTokens;
    totals.completionTokens += record.completionTokens;
    totals.costNano += record.costNano;
  }
  return [...groups.values()].sort((first, second) =>
    first.group < second.group ? -1 : first.group > second.group ? 1 : 0,
  );
}

function groupOf(record: UsageRecord, grouping: UsageGrouping): string {
  switch (grouping) {
    case "day":
      return record.createdAt.toISOString().slice(0, 10);
    case "model":
      return record.model;
    case "key":
      return record.keyPublicId;
    default: {
      const unexpected: never = grouping;
      throw new Error(`Unknown grouping ${String(unexpected)}`);
    }
  }
}

/** One group as JSON: the group under its grouping's name (`day`, `model`, `key`), then totals. */
export function renderUsageGroup(
  group: UsageGroup,
  grouping: UsageGrouping,
): Record<string, string | number> {
  return {
    [grouping]: group.group,
    ...(group.account === undefined ? {} : { account: group.account }),
    requests: group.requests,
    prompt_tokens: group.promptTokens,
    completion_tokens: group.completionTokens,
    cost: formatAmount(group.costNano),
  };
}

/** The CSV (or table) columns of grouped usage. */
export function usageGroupColumns(grouping: UsageGrouping): string[] {
  return [
    grouping,
    ...(grouping === "key" ? ["account"] : []),
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cost",
  ];
}

/** The CSV columns of ungrouped usage: the JSON fields, in order. */
export const USAGE_ROW_COLUMNS = [
  "request_id",
  "account",
  "key",
  "model",
  "prompt_tokens",
  "completion_tokens",
  "cost",
  "finish_reason",
  "error_code",
  "estimated",
  "created",
] as const satisfies readonly (keyof UsageRow)[];

/** A report as columns and cells (for CSV), grouped or not; `null` is an empty cell. */
export function tabulateUsage(
  report: UsageReport,
  grouping: UsageGrouping | undefined,
): { headers: string[]; rows: (string | number | boolean | null)[][] } {
  if (grouping === undefined) {
    return {
      headers: [...USAGE_ROW_COLUMNS],
      rows: renderUsageRows(report).map((row) => USAGE_ROW_COLUMNS.map((column) => row[column])),
    };
  }
  const headers = usageGroupColumns(grouping);
  return {
    headers,
    rows: groupUsage(report, grouping).map((group) => {
      const rendered = renderUsageGroup(group, grouping);
      return headers.map((column) => rendered[column] ?? null);
    }),
  };
}

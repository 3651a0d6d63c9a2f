import { setImmediate } from "node:timers/promises";
import { formatAmount } from "../billing/money.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import type { UsageCursor, UsageFilter, UsageGrouping } from "../store/usage-query.ts";
import { AdminError } from "./admin-error.ts";
import { requireAccount } from "./find-account.ts";
import { type CsvValue, formatCsvLine } from "./format-csv.ts";
import { hasNulCharacter } from "./has-nul-character.ts";
import { decodePageCursor, encodePageCursor } from "./page-cursor.ts";
import { parseInstant } from "./parse-instant.ts";
import { readAccountNames } from "./read-account-names.ts";
import { resolveKeyReference } from "./read-key-reference.ts";

/** The filters of `usage` and `GET /admin/usage`, as the operator wrote them. */
export interface UsageQuery {
  /** An account name or id. */
  account?: string | undefined;
  /** A key's public id, or the whole key (only its public id is used). */
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
  /** The `user` the request named, if any. */
  user: string | null;
  /** Milliseconds waiting for the model, to the first token (or part), and in all; `null` where unknown. */
  queue_ms: number | null;
  first_token_ms: number | null;
  total_ms: number;
  /**
   * The row's own id, unique (request ids may repeat): what tells apart rows read twice, as by a
   * poller that reads the last minute again (see README, usage listing on PostgreSQL).
   */
  id: string;
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

/** What a usage query selects: the store's filter, with the account names its rows refer to. */
export interface UsageSelection {
  filter: UsageFilter;
  /**
   * Account names by id: the filter's account from the start, and those of the rows and groups
   * read so far ({@link readUsagePages} and {@link sumUsageGroups} add them before they answer),
   * never every account.
   */
  accountNames: Map<string, string>;
  /**
   * `true` when a filter names what no row holds (a model id with a NUL, which PostgreSQL cannot
   * even be asked about): the readers answer no rows without asking the store.
   */
  matchesNothing: boolean;
}

/** How many rows {@link readUsagePages} reads per query: a few milliseconds on SQLite. */
export const USAGE_PAGE_ROWS = 1000;

/**
 * Resolves the operator's filters. Throws an {@link AdminError}: `not_found` for an unknown
 * account or key, `invalid_value` for an instant that is not ISO 8601 or a `since` not before
 * `until`.
 */
export async function selectUsage(store: Store, query: UsageQuery): Promise<UsageSelection> {
  const filter: UsageFilter = {};
  const accountNames = new Map<string, string>();
  if (query.account !== undefined) {
    // Not found: said as everywhere else, naming a name that differs only in case.
    const account = await requireAccount(store, query.account);
    filter.accountId = account.id;
    accountNames.set(account.id, account.name);
  }
  if (query.key !== undefined) {
    // A whole key is taken by its public id, as `keys revoke` takes it; other text is not
    // repeated (it may be a mistyped secret).
    const publicId = await resolveKeyReference(store, query.key);
    if ((await store.getApiKeyByPublicId(publicId)) === undefined) {
      throw new AdminError("not_found", `No key has the public id ${JSON.stringify(publicId)}.`, {
        field: "key",
      });
    }
    filter.keyPublicId = publicId;
  }
  if (query.model !== undefined) filter.model = query.model;
  if (query.since !== undefined) filter.since = readInstant("since", query.since);
  if (query.until !== undefined) filter.until = readInstant("until", query.until);
  if (filter.since !== undefined && filter.until !== undefined && filter.since >= filter.until) {
    throw new AdminError("invalid_value", "since must be before until (until is exclusive).", {
      field: "since",
    });
  }
  return {
    filter,
    accountNames,
    matchesNothing: filter.model !== undefined && hasNulCharacter(filter.model),
  };
}

function readInstant(field: "since" | "until", text: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new AdminError("invalid_value", `${field}: ${reason}`, { field, cause: error });
  }
}

/**
 * The selected rows, oldest first, in pages of at most {@link USAGE_PAGE_ROWS}: those after
 * `after`, at most `limit` of them (every one without). Each page is one indexed query however
 * deep into the ledger, and the event loop runs between pages, so a server can stream a ledger
 * of millions of rows while it serves requests, in constant memory. The names of a page's
 * accounts are in `selection.accountNames` when it is yielded (read for that page's accounts
 * only, when not known yet).
 */
export async function* readUsagePages(
  store: Store,
  selection: UsageSelection,
  options: { after?: UsageCursor | undefined; limit?: number | undefined } = {},
): AsyncGenerator<UsageRecord[]> {
  if (selection.matchesNothing) return;
  let after = options.after;
  let left = options.limit ?? Number.POSITIVE_INFINITY;
  while (left > 0) {
    const limit = Math.min(USAGE_PAGE_ROWS, left);
    const page = await store.listUsage(selection.filter, { limit, after });
    if (page.length > 0) {
      await readAccountNames(
        store,
        page.map((record) => record.accountId),
        selection.accountNames,
      );
      yield page;
    }
    if (page.length < limit) return;
    left -= page.length;
    const last = page[page.length - 1] as UsageRecord;
    after = { createdAt: last.createdAt, id: last.id };
    await setImmediate();
  }
}

/** Totals per day (UTC), model or key, summed by the store, in ascending order of the group. */
export async function sumUsageGroups(
  store: Store,
  selection: UsageSelection,
  grouping: UsageGrouping,
): Promise<UsageGroup[]> {
  if (selection.matchesNothing) return [];
  const totals = await store.sumUsage(selection.filter, grouping);
  await readAccountNames(
    store,
    totals.map((each) => each.accountId),
    selection.accountNames,
  );
  return totals
    .map((each) => ({
      group: each.group,
      account:
        each.accountId === undefined
          ? undefined
          : (selection.accountNames.get(each.accountId) ?? each.accountId),
      requests: each.requests,
      promptTokens: each.promptTokens,
      completionTokens: each.completionTokens,
      costNano: each.costNano,
    }))
    .sort((first, second) => (first.group < second.group ? -1 : first.group > second.group ? 1 : 0));
}

/** The cursor of a page ending at this row (see {@link encodePageCursor}). */
export function encodeUsageCursor(record: UsageRecord): string {
  return encodePageCursor("usage", record.createdAt, record.id);
}

/** Reads {@link encodeUsageCursor}'s text; throws an `invalid_value` {@link AdminError} otherwise. */
export function decodeUsageCursor(text: string): UsageCursor {
  const { createdAt, tieBreaker } = decodePageCursor(text, "usage");
  return { createdAt, id: tieBreaker };
}

/** A row as `usage --format json` prints it. */
export function renderUsageRow(record: UsageRecord, accountNames: ReadonlyMap<string, string>): UsageRow {
  return {
    request_id: record.requestId,
    account: accountNames.get(record.accountId) ?? record.accountId,
    key: record.keyPublicId,
    model: record.model,
    prompt_tokens: record.promptTokens,
    completion_tokens: record.completionTokens,
    cost: formatAmount(record.costNano),
    finish_reason: record.finishReason ?? null,
    error_code: record.errorCode ?? null,
    estimated: record.estimated,
    created: record.createdAt.toISOString(),
    user: record.user ?? null,
    queue_ms: record.queueMs ?? null,
    first_token_ms: record.firstTokenMs ?? null,
    total_ms: record.totalMs,
    id: record.id,
  };
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
function usageGroupColumns(grouping: UsageGrouping): string[] {
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
const USAGE_ROW_COLUMNS = [
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
  "user",
  "queue_ms",
  "first_token_ms",
  "total_ms",
  "id",
] as const satisfies readonly (keyof UsageRow)[];

/** A row's CSV cells, in the order of {@link USAGE_ROW_COLUMNS}; `null` is an empty cell. */
function usageRowCells(row: UsageRow): CsvValue[] {
  return USAGE_ROW_COLUMNS.map((column) => row[column]);
}

/** A group's CSV cells, in the order of {@link usageGroupColumns}. */
function usageGroupCells(group: UsageGroup, grouping: UsageGrouping): CsvValue[] {
  const rendered = renderUsageGroup(group, grouping);
  return usageGroupColumns(grouping).map((column) => rendered[column] ?? null);
}

/**
 * The CSV lines (without line breaks) of the selected rows, or of their totals per group: the
 * header, then the rows a page at a time (see {@link readUsagePages}). The header comes with the
 * first page (or every group), so that a caller that waits for the first lines before answering
 * has run the first query: a store that fails then can still be answered with an error.
 */
export async function* usageCsvLines(
  store: Store,
  selection: UsageSelection,
  grouping: UsageGrouping | undefined,
  options: { after?: UsageCursor | undefined; limit?: number | undefined } = {},
): AsyncGenerator<string[]> {
  if (grouping !== undefined) {
    const groups = await sumUsageGroups(store, selection, grouping);
    yield [
      formatCsvLine(usageGroupColumns(grouping)),
      ...groups.map((group) => formatCsvLine(usageGroupCells(group, grouping))),
    ];
    return;
  }
  const formatPage = (page: UsageRecord[]) => usageRowsCsv(page, selection.accountNames);
  const pages = readUsagePages(store, selection, options);
  const first = await pages.next();
  yield [USAGE_CSV_HEADER, ...(first.done === true ? [] : formatPage(first.value))];
  for await (const page of pages) yield formatPage(page);
}

/** The header line of the usage rows' CSV. */
export const USAGE_CSV_HEADER = formatCsvLine(USAGE_ROW_COLUMNS);

/** The CSV lines of usage `records`, in {@link USAGE_ROW_COLUMNS} order, their accounts named by `accountNames`. */
export function usageRowsCsv(
  records: readonly UsageRecord[],
  accountNames: UsageSelection["accountNames"],
): string[] {
  return records.map((record) => formatCsvLine(usageRowCells(renderUsageRow(record, accountNames))));
}

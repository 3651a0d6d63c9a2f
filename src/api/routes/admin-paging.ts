import { decodePageCursor, type PageCursor, type PagedListing } from "../../admin/page-cursor.ts";
import { AppError } from "../../errors/app-error.ts";
import { mapAdminErrors } from "./admin-route-helpers.ts";

/**
 * The paging of the admin listings (accounts, keys, usage rows): the `limit` and `after` a page is
 * asked with, and the `has_more` and `next_after` it answers.
 */

/**
 * Rows in a page of `GET /admin/usage` as JSON (accounts and keys in a page of their listings)
 * unless `limit` says otherwise, and the most it may say.
 */
export const DEFAULT_PAGE_LIMIT = 1000;
export const MAX_PAGE_LIMIT = 10_000;

/** The `limit` (DEFAULT_PAGE_LIMIT unless given) and `after` of a page of accounts or keys. */
export async function readPageRequest(
  query: {
    limit?: string | undefined;
    after?: string | undefined;
  },
  listing: PagedListing,
): Promise<{ limit: number; after: PageCursor | undefined }> {
  const cursor = query.after;
  return {
    limit: query.limit === undefined ? DEFAULT_PAGE_LIMIT : readPageLimit(query.limit),
    after:
      cursor === undefined ? undefined : await mapAdminErrors(async () => decodePageCursor(cursor, listing)),
  };
}

/**
 * A page of a listing from `items`, read with one more than `limit` to say whether another page
 * follows: its first `limit` items, `has_more`, and `next_after`, the cursor of its last item; an
 * empty page gives back the cursor it was asked with (`after`), so that a poller following
 * next_after stays where it was instead of starting again from the first row.
 */
export function finishPage<Item>(
  items: Item[],
  limit: number,
  after: string | undefined,
  cursorOf: (last: Item) => string,
): { items: Item[]; position: { has_more: boolean; next_after: string | null } } {
  const hasMore = items.length > limit;
  if (hasMore) items.length = limit;
  const last = items.at(-1);
  return {
    items,
    position: { has_more: hasMore, next_after: last === undefined ? (after ?? null) : cursorOf(last) },
  };
}

/** The `limit` of a listing (a query string, so text): a whole number of rows in range. */
export function readPageLimit(text: string): number {
  const limit = /^[0-9]{1,6}$/.test(text) ? Number(text) : Number.NaN;
  if (limit >= 1 && limit <= MAX_PAGE_LIMIT) return limit;
  throw new AppError("invalid_value", `limit must be a whole number from 1 to ${MAX_PAGE_LIMIT}.`, {
    param: "limit",
  });
}

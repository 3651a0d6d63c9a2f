/** Rows a CLI listing reads per query: `keys list` and `accounts list` hold one page, never the whole table. */
export const LISTING_PAGE_ROWS = 1000;

/**
 * A listing a page at a time, in the store's order: `readPage` answers up to `limit` items after
 * `after` (the cursor of the last item read; `undefined` for the first page). Ends after the
 * first short page; yields no empty page.
 */
export async function* readPages<Item, Cursor>(
  readPage: (limit: number, after: Cursor | undefined) => Promise<Item[]>,
  cursorOf: (last: Item) => Cursor,
  limit: number = LISTING_PAGE_ROWS,
): AsyncGenerator<Item[]> {
  let after: Cursor | undefined;
  for (;;) {
    const page = await readPage(limit, after);
    const last = page.at(-1);
    if (last === undefined) return;
    yield page;
    if (page.length < limit) return;
    after = cursorOf(last);
  }
}

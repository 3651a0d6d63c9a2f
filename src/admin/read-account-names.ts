import type { Store } from "../store/store.ts";

/**
 * Adds to `names` (account names by id) the names of those of `accountIds` it lacks, reading only
 * those accounts: a listing names the accounts of the rows it shows, never every account (on
 * SQLite a read of every account blocks the server for as long as it takes, per page). An id that
 * names no account stays out; callers show the id instead. Returns `names`.
 */
export async function readAccountNames(
  store: Store,
  accountIds: Iterable<string | undefined>,
  names: Map<string, string> = new Map(),
): Promise<Map<string, string>> {
  const missing = new Set<string>();
  for (const id of accountIds) {
    if (id !== undefined && !names.has(id)) missing.add(id);
  }
  if (missing.size === 0) return names;
  for (const account of await store.getAccountsByIds([...missing])) names.set(account.id, account.name);
  return names;
}

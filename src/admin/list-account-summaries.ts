import type { AccountPage, AccountWithMoney, Store } from "../store/store.ts";
import { type AccountSummary, summarizeAccount } from "./describe-account.ts";

/** An account of {@link listAccountSummaries}: the store's record and its summary. */
export interface ListedAccount {
  account: AccountWithMoney;
  summary: AccountSummary;
}

/**
 * The accounts as `accounts list` and `GET /admin/accounts` show them, oldest first, with the
 * same figures as `describeAccount` gives one at a time, read in one query (a query per account
 * cost seconds of a blocked SQLite server at 100,000 accounts): every one, or one `page`.
 */
export async function listAccountSummaries(store: Store, page?: AccountPage): Promise<ListedAccount[]> {
  const accounts = await store.listAccountsWithMoney(page);
  return accounts.map((account) => ({ account, summary: summarizeAccount(account, account) }));
}

import { formatAmount } from "../billing/money.ts";
import type { Account, AccountMoney, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";

/**
 * An account as `accounts show --format json` and the admin API show it (SPEC §11): amounts as
 * decimal strings in the account currency, never numbers.
 */
export interface AccountSummary {
  id: string;
  name: string;
  /** Credits minus settled charges. */
  balance: string;
  /** Set aside for requests running now. */
  reserved: string;
  /** Settled charges, all time. */
  spent: string;
}

/** The account's money now; throws an {@link AdminError} (`not_found`) if it has just gone. */
export async function describeAccount(
  store: Store,
  account: Pick<Account, "id" | "name">,
): Promise<AccountSummary> {
  const money = await store.getAccountMoney(account.id);
  if (money === undefined) {
    throw new AdminError("not_found", `No account has the id ${account.id}.`, { field: "account" });
  }
  return summarizeAccount(account, money);
}

/** An account's money as the admin API and CLI show it (SPEC §11): decimal strings, in this order. */
export function summarizeAccount(account: Pick<Account, "id" | "name">, money: AccountMoney): AccountSummary {
  return {
    id: account.id,
    name: account.name,
    balance: formatAmount(money.balanceNano),
    reserved: formatAmount(money.reservedNano),
    spent: formatAmount(money.spentNano),
  };
}

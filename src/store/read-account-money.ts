import type { Kysely } from "kysely";
import { readBigInt } from "./column-values.ts";
import type { Database } from "./database.ts";
import type { AccountBalance, AccountMoney } from "./store.ts";

/** An account's balance and reserved money, as the file (or database) has them. */
export async function readAccountBalance(
  db: Kysely<Database>,
  accountId: string,
): Promise<AccountBalance | undefined> {
  const row = await db
    .selectFrom("accounts")
    .select(["balance_nano", "reserved_nano"])
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return { balanceNano: readBigInt(row.balance_nano), reservedNano: readBigInt(row.reserved_nano) };
}

/** An account's balance, reserved and spent money, as the file (or database) has them. */
export async function readAccountMoney(
  db: Kysely<Database>,
  accountId: string,
): Promise<AccountMoney | undefined> {
  const row = await db
    .selectFrom("accounts")
    .select(["balance_nano", "reserved_nano", "spent_nano"])
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    balanceNano: readBigInt(row.balance_nano),
    reservedNano: readBigInt(row.reserved_nano),
    spentNano: readBigInt(row.spent_nano),
  };
}

/** Whether the account exists: what tells a refusal's two causes apart. */
export async function accountExists(db: Kysely<Database>, accountId: string): Promise<boolean> {
  return (
    (await db.selectFrom("accounts").select("id").where("id", "=", accountId).executeTakeFirst()) !==
    undefined
  );
}

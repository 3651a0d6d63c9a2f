import { randomUUID } from "node:crypto";
import { formatAmount } from "../billing/money.ts";
import type { Account, CreditRecord, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";

/** What an operator gives to credit an account. */
export interface CreditAccountInput {
  account: Pick<Account, "id" | "name">;
  /** Nano-units; more than zero. */
  amountNano: bigint;
  /** Why; at most {@link MAX_CREDIT_NOTE_LENGTH} characters. `undefined` or empty for none. */
  note?: string | undefined;
}

/** The longest note a credit may carry. */
export const MAX_CREDIT_NOTE_LENGTH = 500;

/**
 * Adds money to an account: a credit row and the raised balance, in one transaction. Throws an {@link AdminError}: `invalid_value` for an amount of zero, a note too long or a
 * balance that would pass the largest amount; `not_found` when the account is gone.
 */
export async function creditAccount(
  store: Store,
  input: CreditAccountInput,
  options: { now?: () => Date } = {},
): Promise<CreditRecord> {
  if (input.amountNano <= 0n) {
    throw new AdminError("invalid_value", "The amount to credit must be more than 0.", { field: "amount" });
  }
  const note = input.note === undefined || input.note === "" ? undefined : input.note;
  if (note !== undefined && note.length > MAX_CREDIT_NOTE_LENGTH) {
    throw new AdminError("invalid_value", `A note has at most ${MAX_CREDIT_NOTE_LENGTH} characters.`, {
      field: "note",
    });
  }
  const credit: CreditRecord = {
    id: randomUUID(),
    accountId: input.account.id,
    amountNano: input.amountNano,
    note,
    createdAt: (options.now ?? (() => new Date()))(),
  };
  const result = await store.credit(credit);
  switch (result) {
    case "credited":
      return credit;
    case "account_not_found":
      throw new AdminError("not_found", `No account has the id ${input.account.id}.`, { field: "account" });
    case "balance_too_large":
      throw new AdminError(
        "invalid_value",
        `Crediting ${formatAmount(input.amountNano)} would take the balance of ${input.account.name} past the largest amount a store holds.`,
        { field: "amount" },
      );
    default: {
      const unexpected: never = result;
      throw new Error(`Unexpected result ${String(unexpected)}`);
    }
  }
}

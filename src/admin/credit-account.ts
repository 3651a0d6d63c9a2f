import { createHash, randomUUID } from "node:crypto";
import { formatAmount } from "../billing/money.ts";
import type { Account, AccountMoney, CreditRecord, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { hasMoreCharactersThan } from "./count-characters.ts";
import { hideKeySecrets } from "./read-key-reference.ts";

/** What an operator gives to credit an account. */
export interface CreditAccountInput {
  account: Pick<Account, "id" | "name">;
  /** Nano-units; more than zero. */
  amountNano: bigint;
  /**
   * Why; at most {@link MAX_CREDIT_NOTE_LENGTH} characters (code points: an emoji is one).
   * `undefined` or empty for none. A lone surrogate in it is kept as U+FFFD, as stores keep it.
   */
  note?: string | undefined;
  /**
   * The client's `Idempotency-Key`: a retry with the same key credits once. The credit's id is
   * made from the account and the key, so the store's unique ids keep it once, across replicas.
   */
  idempotencyKey?: string | undefined;
}

/** What {@link creditAccount} did. */
export interface CreditOutcome {
  credit: CreditRecord;
  /** `true` when the credit was made before with the same idempotency key: nothing changed now. */
  replayed: boolean;
  /**
   * The account's money as the credit left it (read in its transaction): what to show, with no
   * read after the commit that could fail and have a client credit again.
   */
  money: AccountMoney;
}

/** The id of the credit an idempotency key stands for on an account: a UUID from their SHA-256. */
export function creditIdFor(accountId: string, idempotencyKey: string): string {
  const hex = createHash("sha256").update(`credit\u0000${accountId}\u0000${idempotencyKey}`).digest("hex");
  // Version 8 (custom) and the RFC 9562 variant, so it reads as the UUID it stands in for.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((Number.parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
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
): Promise<CreditOutcome> {
  if (input.amountNano <= 0n) {
    throw new AdminError("invalid_value", "The amount to credit must be more than 0.", { field: "amount" });
  }
  // A lone surrogate (half an emoji, cut by a client; the admin API refuses it) is stored as U+FFFD:
  // made well formed first, the note stored, answered and compared with a retry's is the same.
  const note = input.note === undefined || input.note === "" ? undefined : input.note.toWellFormed();
  if (note !== undefined && hasMoreCharactersThan(note, MAX_CREDIT_NOTE_LENGTH)) {
    throw new AdminError("invalid_value", `A note has at most ${MAX_CREDIT_NOTE_LENGTH} characters.`, {
      field: "note",
    });
  }
  // A whole key pasted into a note would be kept in the ledger for good, and shown in listings,
  // backups and answers (only a key's hash is stored anywhere else).
  if (note !== undefined && hideKeySecrets(note) !== note) {
    throw new AdminError("invalid_value", "That note holds an API key; write it without the key.", {
      field: "note",
    });
  }
  const credit: CreditRecord = {
    id:
      input.idempotencyKey === undefined ? randomUUID() : creditIdFor(input.account.id, input.idempotencyKey),
    accountId: input.account.id,
    amountNano: input.amountNano,
    note,
    createdAt: (options.now ?? (() => new Date()))(),
  };
  const result = await store.credit(credit);
  switch (result.outcome) {
    case "credited":
      return { credit, replayed: false, money: result.money };
    case "already_credited": {
      // By its id: an account's every credit would be read (and parsed on the event loop) otherwise.
      const earlier = await store.getCredit(credit.id);
      if (earlier === undefined || earlier.accountId !== input.account.id)
        throw new Error(`Credit ${credit.id} exists on another account.`);
      // The same key for another credit is a client's mistake, not a retry.
      if (earlier.amountNano !== credit.amountNano || earlier.note !== credit.note) {
        throw new AdminError(
          "invalid_value",
          `This Idempotency-Key was used for a credit of ${formatAmount(earlier.amountNano)}${earlier.note === undefined ? "" : ` (${JSON.stringify(earlier.note)})`} on ${earlier.createdAt.toISOString()}; use a new key for another credit.`,
          { field: "idempotency-key" },
        );
      }
      return { credit: earlier, replayed: true, money: result.money };
    }
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
      throw new Error(`Unexpected result ${JSON.stringify(unexpected)}`);
    }
  }
}

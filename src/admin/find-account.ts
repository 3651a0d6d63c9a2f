import type { Account, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { hasNulCharacter } from "./has-nul-character.ts";
import { showTyped } from "./read-key-reference.ts";

/** The shape of account ids (UUIDs). */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The account with this id or, failing that, this name. */
export async function findAccount(store: Store, nameOrId: string): Promise<Account | undefined> {
  // No account's name or id holds a NUL, and PostgreSQL fails a query that sends one: such a
  // reference finds nothing, as on SQLite, without asking.
  if (hasNulCharacter(nameOrId)) return undefined;
  if (UUID_PATTERN.test(nameOrId)) {
    const byId = await store.getAccountById(nameOrId.toLowerCase());
    if (byId !== undefined) return byId;
  }
  return await store.getAccountByName(nameOrId);
}

/** The account with this id or name; throws an {@link AdminError} (`not_found`) when there is none. */
export async function requireAccount(store: Store, nameOrId: string): Promise<Account> {
  const account = await findAccount(store, nameOrId);
  if (account === undefined) {
    const shown = JSON.stringify(showTyped(nameOrId));
    // Names are matched exactly ("Zoe" is not "zoe"): one that differs only in case is named.
    const alike = hasNulCharacter(nameOrId) ? [] : await store.listAccountNamesIgnoringCase(nameOrId);
    const hint =
      alike.length === 0
        ? ""
        : ` Names match exactly: did you mean ${alike.map((name) => JSON.stringify(name)).join(" or ")}?`;
    throw new AdminError("not_found", `No account has the name or id ${shown}.${hint}`, {
      field: "account",
    });
  }
  return account;
}

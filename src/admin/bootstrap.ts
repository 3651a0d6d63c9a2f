import type { Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { createAccount } from "./create-account.ts";
import { createKey } from "./create-key.ts";
import { findRefusedAdminKey, type RefusedAdminKey } from "./find-refused-admin-key.ts";
import { hasActiveAdminKey } from "./has-active-admin-key.ts";

/** Options of {@link bootstrap}. */
export interface BootstrapOptions {
  /**
   * The admin key from the configuration (`admin_key`, `TOLLGATE_ADMIN_KEY`). When given, no
   * admin key is generated: the authenticator accepts this one (pass it to it as well), unless
   * it is a stored key that was revoked or has expired, which the authenticator refuses.
   */
  configuredAdminKey?: string | undefined;
  /** The starter account's opening balance in nano-units. Default 0. */
  starterBalanceNano?: bigint;
  now?: () => Date;
}

/** What this start created, to be printed once; every field is `undefined` when it made nothing. */
export interface BootstrapResult {
  /** The whole generated admin key (no account): on a first start, or once no stored one works. */
  adminKey: string | undefined;
  /** The whole starter user key, spending from {@link BootstrapResult.accountName}. */
  starterKey: string | undefined;
  /** The starter account's name (`starter`) when it was created now. */
  accountName: string | undefined;
  /**
   * The configured admin key when it is a stored key that was revoked or has expired: the admin
   * API refuses it, and the operator must be told to change it.
   */
  refusedAdminKey: RefusedAdminKey | undefined;
}

/** The name of the account a fresh store gets. */
export const STARTER_ACCOUNT_NAME = "starter";

/**
 * Makes what a start needs and the store lacks (on a store in use, nothing):
 * - an admin key (role admin, no account) when no configured one works and the store has none
 *   that works (none yet, or every one revoked or expired): an operator who revoked the last one
 *   gets back in by restarting the server, which prints the new key. A configured key that is a
 *   revoked or expired stored key (the printed admin key put in `TOLLGATE_ADMIN_KEY`, then
 *   revoked) works no more than an unset one: the operator would otherwise be locked out with the
 *   only key they hold refused;
 * - the account `starter` with one user key when the store has no account at all (an operator
 *   who made accounts with the CLI before the first start gets none).
 * The returned keys exist nowhere else: print them once.
 *
 * Replicas starting on one PostgreSQL store at the same instant take turns (Store.runAlone): one
 * makes the admin key and the starter account, the others find them.
 */
export async function bootstrap(store: Store, options: BootstrapOptions = {}): Promise<BootstrapResult> {
  const clock = options.now === undefined ? {} : { now: options.now };
  const result: BootstrapResult = {
    adminKey: undefined,
    starterKey: undefined,
    accountName: undefined,
    refusedAdminKey: undefined,
  };

  // Replicas starting together on one PostgreSQL database take turns: each saw no admin key that
  // worked, and each made and printed one (Store.runAlone).
  const alone = store.runAlone?.bind(store) ?? (<T>(_name: string, work: () => Promise<T>) => work());
  return alone("bootstrap", () => bootstrapAlone(store, result, clock, options));
}

async function bootstrapAlone(
  store: Store,
  result: BootstrapResult,
  clock: { now?: () => Date },
  options: BootstrapOptions,
): Promise<BootstrapResult> {
  const configuredKey = options.configuredAdminKey ?? "";
  const now = (options.now ?? (() => new Date()))();
  if (configuredKey !== "") result.refusedAdminKey = await findRefusedAdminKey(store, configuredKey, now);
  const configuredWorks = configuredKey !== "" && result.refusedAdminKey === undefined;
  if (!configuredWorks && !(await hasActiveAdminKey(store, now))) {
    const created = await createKey(store, { role: "admin", accountId: undefined, name: "admin" }, clock);
    result.adminKey = created.key;
  }

  if (!(await store.hasAccounts())) {
    const account = await createStarterAccount(store, options.starterBalanceNano ?? 0n, clock);
    if (account !== undefined) {
      const created = await createKey(store, { role: "user", accountId: account.id, name: "starter" }, clock);
      result.starterKey = created.key;
      result.accountName = account.name;
    }
  }
  return result;
}

/** The new starter account, or `undefined` when another process made it first. */
async function createStarterAccount(
  store: Store,
  balanceNano: bigint,
  clock: { now?: () => Date },
): Promise<{ id: string; name: string } | undefined> {
  try {
    return await createAccount(store, { name: STARTER_ACCOUNT_NAME, balanceNano }, clock);
  } catch (error) {
    if (error instanceof AdminError && error.kind === "conflict") {
      // Made by a concurrent start: that process prints its key.
      return undefined;
    }
    throw error;
  }
}

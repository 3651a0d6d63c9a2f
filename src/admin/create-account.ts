import { randomUUID } from "node:crypto";
import type { Account, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { UUID_PATTERN } from "./find-account.ts";
import { hideKeySecrets, showTyped } from "./read-key-reference.ts";

/** What an operator gives to open an account. */
export interface CreateAccountInput {
  /** Unique; 1 to 64 characters: ASCII letters, digits, `.`, `_`, `@`, `-`, starting with a letter or digit. */
  name: string;
  /** The opening balance in nano-units. Default 0. */
  balanceNano?: bigint;
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

/**
 * Opens an account with a new id. Throws an {@link AdminError} for a bad name or balance
 * (`invalid_value`) and a name already taken (`conflict`). The account answered has the creation
 * time the store wrote: on a server's PostgreSQL store the database's, not `now` (replicas' clocks
 * differ, and the listings go by the time stored).
 */
export async function createAccount(
  store: Store,
  input: CreateAccountInput,
  options: { now?: () => Date } = {},
): Promise<Account> {
  validateAccountName(input.name);
  const balanceNano = input.balanceNano ?? 0n;
  if (balanceNano < 0n) {
    throw new AdminError("invalid_value", "The opening balance must be zero or more.", { field: "balance" });
  }
  const account: Account = {
    id: randomUUID(),
    name: input.name,
    balanceNano,
    createdAt: (options.now ?? (() => new Date()))(),
  };
  let createdAt = account.createdAt;
  const result = await store.insertAccount(account, {
    onCreated: (written) => {
      createdAt = written;
    },
  });
  switch (result) {
    case "created":
      return { ...account, createdAt };
    case "name_taken_ignoring_case": {
      // "Zoe" beside "zoe": `accounts credit zoe 100` would credit whichever was typed, right or not.
      const alike = (await store.listAccountNamesIgnoringCase(input.name)).find(
        (name) => name !== input.name,
      );
      throw new AdminError(
        "conflict",
        `An account named "${alike ?? input.name}" already exists, and names that differ only in case are refused (a credit to the wrong one would be too easy); choose another name.`,
        { field: "name" },
      );
    }
    case "name_taken":
      throw new AdminError(
        "conflict",
        `An account named "${input.name}" already exists; choose another name.`,
        {
          field: "name",
        },
      );
    default: {
      const unexpected: never = result;
      throw new Error(`Unexpected result ${String(unexpected)}`);
    }
  }
}

/** Throws an {@link AdminError} unless `name` is a valid account name. */
export function validateAccountName(name: string): void {
  if (!NAME_PATTERN.test(name)) {
    throw new AdminError(
      "invalid_value",
      // Cut: a megabyte name was sent back whole (the longest valid one is 64 characters).
      `${JSON.stringify(showTyped(name, 83))} is not a valid account name: use 1 to 64 ASCII letters (a-z, A-Z), digits, ".", "_", "@" or "-", starting with a letter or digit.`,
      { field: "name" },
    );
  }
  // A whole key pasted as a name would be shown in every listing, usage row and export.
  if (hideKeySecrets(name) !== name) {
    throw new AdminError("invalid_value", "That name is an API key; choose a name.", { field: "name" });
  }
  // Accounts are named by name or id on the command line: a name shaped like an id would be ambiguous.
  if (UUID_PATTERN.test(name)) {
    throw new AdminError(
      "invalid_value",
      `${JSON.stringify(name)} looks like an account id; choose a name.`,
      {
        field: "name",
      },
    );
  }
}

import { randomUUID } from "node:crypto";
import { generateApiKey } from "../auth/api-key.ts";
import type { ApiKeyRecord, KeyRole, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import {
  validateAllowedModels,
  validateExpiry,
  validateKeyName,
  validateLimit,
} from "./validate-key-settings.ts";

/** The settings of a new key. */
export interface CreateKeyInput {
  role: KeyRole;
  /** Required for user keys; admin keys have none. */
  accountId: string | undefined;
  /** A label; default empty. At most 100 characters (code points: an emoji is one). */
  name?: string | undefined;
  /** Model ids the key may use; `undefined` means every model. Must not be empty. */
  allowedModels?: string[] | undefined;
  /** Requests per minute, a whole number of at least 1; `undefined` means no limit. */
  rpm?: number | undefined;
  /** Tokens per minute, a whole number of at least 1; `undefined` means no limit. */
  tpm?: number | undefined;
  /** When the key stops working, after now; `undefined` means never. */
  expiresAt?: Date | undefined;
}

/** A key just made: `key` is the whole key, shown once and never stored. */
export interface CreatedKey {
  key: string;
  record: ApiKeyRecord;
}

/**
 * Makes a key and stores its hash. Throws an {@link AdminError} (`invalid_value`) for settings
 * that make no sense. The account is not looked up here: resolve it first (`requireAccount`).
 * With `knownModels` (the catalogue's ids), every allowed model must be one of them: a typo
 * would make a key that can use nothing. The record answered has the creation time the store
 * wrote: on a server's PostgreSQL store the database's, not `now` (as `createAccount`'s).
 */
export async function createKey(
  store: Store,
  input: CreateKeyInput,
  options: { now?: () => Date; knownModels?: readonly string[] } = {},
): Promise<CreatedKey> {
  const now = (options.now ?? (() => new Date()))();
  if (input.role === "user" && input.accountId === undefined) {
    throw new AdminError("invalid_value", "A user key needs an account.", { field: "account" });
  }
  const name = validateKeyName(input.name ?? "");
  const allowedModels =
    input.allowedModels === undefined
      ? undefined
      : validateAllowedModels(input.allowedModels, options.knownModels);
  validateLimit("rpm", input.rpm);
  validateLimit("tpm", input.tpm);
  validateExpiry(input.expiresAt, now);

  const generated = generateApiKey();
  const record: ApiKeyRecord = {
    id: randomUUID(),
    publicId: generated.publicId,
    accountId: input.accountId,
    role: input.role,
    name,
    secretHash: generated.secretHash,
    allowedModels,
    rpm: input.rpm,
    tpm: input.tpm,
    expiresAt: input.expiresAt,
    revokedAt: undefined,
    createdAt: now,
  };
  let createdAt = record.createdAt;
  await store.insertApiKey(record, {
    onCreated: (written) => {
      createdAt = written;
    },
  });
  return { key: generated.key, record: { ...record, createdAt } };
}

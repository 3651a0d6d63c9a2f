import { randomUUID } from "node:crypto";
import { generateApiKey } from "../auth/api-key.ts";
import { suggestName } from "../catalog/suggest-name.ts";
import type { ApiKeyRecord, KeyRole, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { hasMoreCharactersThan } from "./count-characters.ts";
import { hideKeySecrets } from "./read-key-reference.ts";
import { showControlCharacters } from "./show-control-characters.ts";

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

const MAX_NAME_LENGTH = 100;

/**
 * Makes a key and stores its hash. Throws an {@link AdminError} (`invalid_value`) for settings
 * that make no sense. The account is not looked up here: resolve it first (`requireAccount`).
 * With `knownModels` (the catalogue's ids), every allowed model must be one of them: a typo
 * would make a key that can use nothing.
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
  // Well-formed, as the store keeps it (UTF-8 has no lone surrogates): the name answered is the
  // name listed later.
  const name = (input.name ?? "").toWellFormed();
  if (hasMoreCharactersThan(name, MAX_NAME_LENGTH)) {
    throw new AdminError("invalid_value", `A key name has at most ${MAX_NAME_LENGTH} characters.`, {
      field: "name",
    });
  }
  // Names are printed in tables and logs: a line break would break a table, an escape sequence
  // would reach the operator's terminal, a text-direction mark (U+202E) would show the rest of
  // its row reversed, and a whole key would show its secret in every listing. Other format
  // characters stay: the zero-width joiner holds emoji sequences together.
  if (/[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u.test(name)) {
    throw new AdminError(
      "invalid_value",
      "A key name cannot hold control characters (line breaks, tabs, escapes, text-direction marks).",
      { field: "name" },
    );
  }
  if (hideKeySecrets(name) !== name) {
    throw new AdminError("invalid_value", "That key name is an API key; choose a name.", { field: "name" });
  }
  const allowedModels = input.allowedModels === undefined ? undefined : normalizeModels(input.allowedModels);
  if (allowedModels !== undefined && options.knownModels !== undefined)
    requireKnownModels(allowedModels, options.knownModels);
  validateLimit("rpm", input.rpm);
  validateLimit("tpm", input.tpm);
  if (input.expiresAt !== undefined) {
    if (Number.isNaN(input.expiresAt.getTime())) {
      throw new AdminError("invalid_value", "The expiry is not a valid date.", { field: "expires" });
    }
    if (input.expiresAt.getTime() <= now.getTime()) {
      throw new AdminError(
        "invalid_value",
        `The expiry ${input.expiresAt.toISOString()} is not in the future; give a later date and time.`,
        { field: "expires" },
      );
    }
  }

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
  await store.insertApiKey(record);
  return { key: generated.key, record };
}

function normalizeModels(models: string[]): string[] {
  const unique = [...new Set(models.map((model) => model.trim()))];
  if (unique.length === 0 || unique.some((model) => model === "")) {
    throw new AdminError(
      "invalid_value",
      "The allowed models must be a non-empty list of model ids (leave it out to allow every model).",
      { field: "models" },
    );
  }
  return unique;
}

function requireKnownModels(models: readonly string[], known: readonly string[]): void {
  const unknown = models.find((model) => !known.includes(model));
  if (unknown === undefined) return;
  const suggestion = suggestName(unknown, known);
  const hint =
    suggestion !== undefined
      ? ` Did you mean '${suggestion}'?`
      : known.length === 0
        ? " The catalogue has no models."
        : ` The catalogue has: ${listSome(known)}.`;
  throw new AdminError(
    "invalid_value",
    `No model '${showControlCharacters(unknown)}' in the catalogue.${hint}`,
    {
      field: "models",
    },
  );
}

/** Catalogue ids listed in an error at most: a catalogue of thousands made a 30 KB message. */
const LISTED_IDS = 20;

/** The first {@link LISTED_IDS} of `ids`, and how many more there are. */
function listSome(ids: readonly string[]): string {
  const listed = ids.slice(0, LISTED_IDS).map(showControlCharacters).join(", ");
  return ids.length <= LISTED_IDS
    ? listed
    : `${listed} and ${ids.length - LISTED_IDS} more (see GET /v1/models or \`tollgate models list\`)`;
}

function validateLimit(field: "rpm" | "tpm", value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AdminError(
      "invalid_value",
      `${field} must be a whole number of at least 1 (leave it out for no limit).`,
      { field },
    );
  }
}

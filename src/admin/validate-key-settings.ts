import { hasControlCharacters } from "../catalog/has-control-characters.ts";
import { suggestName } from "../catalog/suggest-name.ts";
import { shownValue } from "../errors/shown-value.ts";
import { AdminError } from "./admin-error.ts";
import { hasMoreCharactersThan } from "./count-characters.ts";
import { hideKeySecrets } from "./read-key-reference.ts";
import { showControlCharacters } from "./show-control-characters.ts";

/**
 * The checks a key's settings pass, as made (`create-key.ts`) or changed (`update-key.ts`):
 * each throws an {@link AdminError} (`invalid_value`) naming the field, and answers the value as
 * the store keeps it.
 */

const MAX_NAME_LENGTH = 100;

/** A key's name, well-formed: at most 100 characters, no control characters, not a key. */
export function validateKeyName(text: string): string {
  // Well-formed, as the store keeps it (UTF-8 has no lone surrogates): the name answered is the
  // name listed later.
  const name = text.toWellFormed();
  if (hasMoreCharactersThan(name, MAX_NAME_LENGTH)) {
    throw new AdminError("invalid_value", `A key name has at most ${MAX_NAME_LENGTH} characters.`, {
      field: "name",
    });
  }
  // Names are printed in tables and logs (see hasControlCharacters), and a whole key would show
  // its secret in every listing.
  if (hasControlCharacters(name)) {
    throw new AdminError(
      "invalid_value",
      "A key name cannot hold control characters (line breaks, tabs, escapes, text-direction marks).",
      { field: "name" },
    );
  }
  if (hideKeySecrets(name) !== name) {
    throw new AdminError("invalid_value", "That key name is an API key; choose a name.", { field: "name" });
  }
  return name;
}

/**
 * The models a key may use: trimmed, without repeats, not empty. With `knownModels` (the
 * catalogue's ids), every one must be among them: a typo would make a key that can use nothing.
 */
export function validateAllowedModels(
  models: string[],
  knownModels: readonly string[] | undefined,
): string[] {
  const unique = [...new Set(models.map((model) => model.trim()))];
  if (unique.length === 0 || unique.some((model) => model === "")) {
    throw new AdminError(
      "invalid_value",
      "The allowed models must be a non-empty list of model ids (leave it out to allow every model).",
      { field: "models" },
    );
  }
  if (knownModels !== undefined) requireKnownModels(unique, knownModels);
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
    `No model '${showControlCharacters(shownValue(unknown))}' in the catalogue.${hint}`,
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

/** An rpm or tpm limit: a whole number of at least 1; `undefined` (no limit) passes. */
export function validateLimit(field: "rpm" | "tpm", value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AdminError(
      "invalid_value",
      `${field} must be a whole number from 1 to ${Number.MAX_SAFE_INTEGER} (leave it out for no limit).`,
      { field },
    );
  }
}

/** An expiry: a valid date after `now`; `undefined` (never) passes. */
export function validateExpiry(expiresAt: Date | undefined, now: Date): void {
  if (expiresAt === undefined) return;
  if (Number.isNaN(expiresAt.getTime())) {
    throw new AdminError("invalid_value", "The expiry is not a valid date.", { field: "expires" });
  }
  if (expiresAt.getTime() <= now.getTime()) {
    throw new AdminError(
      "invalid_value",
      `The expiry ${expiresAt.toISOString()} is not in the future; give a later date and time.`,
      { field: "expires" },
    );
  }
}

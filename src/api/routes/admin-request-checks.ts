import { hasNulCharacter } from "../../admin/has-nul-character.ts";
import { hideKeySecrets } from "../../admin/read-key-reference.ts";
import { AppError } from "../../errors/app-error.ts";
import { describeSuggestion } from "./admin-route-helpers.ts";

/**
 * The admin routes' refusals of input their schemas let through: unknown query parameters, NULs
 * and halves of surrogate pairs in body fields, a body on a request that takes none.
 */

/** Body fields that name a record to find, not a value to store: one with a NUL finds nothing. */
const REFERENCE_FIELDS: ReadonlySet<string> = new Set(["account"]);

/**
 * Refuses what a store cannot keep as it was sent in a body field the route's schema names, other
 * than one that names a record to find ({@link REFERENCE_FIELDS}; finding nothing is the answer
 * there), naming the field: a NUL character (U+0000), which PostgreSQL cannot store where SQLite
 * would, and half of a surrogate pair (a character cut in two), which both store as U+FFFD: a
 * note changed without a word, and two credits whose notes differ only there taken as one
 * credit's replay under the same Idempotency-Key.
 */
export function rejectUnstorableCharacters(body: unknown, schema: unknown): void {
  if (typeof body !== "object" || body === null || !isObjectSchema(schema)) return;
  for (const [field, value] of Object.entries(body)) {
    // Unknown fields are the handler's to refuse, by name and with the one meant.
    if (REFERENCE_FIELDS.has(field) || !Object.hasOwn(schema.properties, field)) continue;
    const texts: unknown[] = Array.isArray(value) ? value : [value];
    if (texts.some((text) => typeof text === "string" && hasNulCharacter(text))) {
      throw new AppError(
        "invalid_value",
        `Invalid '${field}': it holds a NUL character (U+0000), which cannot be stored; remove it.`,
        { param: field },
      );
    }
    if (texts.some((text) => typeof text === "string" && !text.isWellFormed())) {
      throw new AppError(
        "invalid_value",
        `Invalid '${field}': it must be well-formed Unicode, but holds half of a surrogate pair (a character cut in two), which cannot be stored as it is.`,
        { param: field },
      );
    }
  }
}

/**
 * Refuses a body on a request that takes none (no body, `{}` and `null` pass, as HTTP clients
 * send them): a field such as `{"reason": ...}` would otherwise be dropped without a word.
 */
export function rejectAnyBody(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== "object" || Array.isArray(body)) {
    throw new AppError("invalid_type", "This request takes no body (or an empty JSON object).");
  }
  const unknown = Object.keys(body)[0];
  if (unknown === undefined) return;
  throw new AppError(
    "invalid_value",
    `Unknown field '${hideKeySecrets(unknown)}': this request takes none.`,
    {
      param: hideKeySecrets(unknown),
    },
  );
}

/**
 * Refuses query parameters the route's querystring schema does not name (every one where it has
 * none), naming the first one and the parameter meant: ignored, `?acount=acme` would list every
 * account's usage.
 */
export function rejectUnknownQueryParameters(query: unknown, schema: unknown): void {
  if (typeof query !== "object" || query === null) return;
  const known = isObjectSchema(schema) ? Object.keys(schema.properties) : [];
  const unknown = Object.keys(query).find((name) => !known.includes(name));
  if (unknown === undefined) return;
  const shown = hideKeySecrets(unknown);
  const message =
    known.length === 0
      ? `Unknown query parameter '${shown}': this request takes none.`
      : `Unknown query parameter '${shown}'.${describeSuggestion(unknown, known)} The parameters are: ${known.join(", ")}.`;
  throw new AppError("invalid_value", message, { param: shown });
}

/**
 * Refuses a query parameter given more than once (`?limit=1&limit=2`, which arrives as an array):
 * no admin parameter takes several values, and the schema's "expected a string" did not say why.
 */
export function rejectRepeatedQueryParameters(query: unknown): void {
  if (typeof query !== "object" || query === null) return;
  const repeated = Object.entries(query).find(([, value]) => Array.isArray(value))?.[0];
  if (repeated === undefined) return;
  const shown = hideKeySecrets(repeated);
  throw new AppError("invalid_value", `Query parameter '${shown}' is given more than once; give it once.`, {
    param: shown,
  });
}

function isObjectSchema(schema: unknown): schema is { properties: Record<string, unknown> } {
  return (
    typeof schema === "object" &&
    schema !== null &&
    "properties" in schema &&
    typeof schema.properties === "object" &&
    schema.properties !== null
  );
}

import type { TObject } from "@sinclair/typebox";
import { AdminError } from "../../admin/admin-error.ts";
import { parseInstant } from "../../admin/parse-instant.ts";
import { hideKeySecrets } from "../../admin/read-key-reference.ts";
import { isPublicId } from "../../auth/api-key.ts";
import { suggestName } from "../../catalog/suggest-name.ts";
import { AppError } from "../../errors/app-error.ts";
import type { ApiKeyRecord } from "../../store/store.ts";

/** What the admin routes (`admin-*.ts`) share: validation and rendering. */

/** The operator-facing field names that differ from the request fields. */
const PARAM_OF_FIELD: Readonly<Record<string, string>> = { expires: "expires_at" };

/** A key as the admin API shows it: never its secret or hash. */
export function renderKey(key: ApiKeyRecord, accountName: string | undefined) {
  return {
    public_id: key.publicId,
    account_id: key.accountId ?? null,
    account: accountName ?? null,
    role: key.role,
    name: key.name,
    models: key.allowedModels ?? null,
    rpm: key.rpm ?? null,
    tpm: key.tpm ?? null,
    expires_at: key.expiresAt?.toISOString() ?? null,
    revoked_at: key.revokedAt?.toISOString() ?? null,
    created_at: key.createdAt.toISOString(),
  };
}

/**
 * The `:id` of a key route: a public id only, as `GET /admin/keys` lists them. A whole key in a
 * URL would leave its secret in access logs.
 */
export function readKeyIdParam(publicId: string): string {
  if (isPublicId(publicId)) return publicId;
  throw new AppError(
    "invalid_value",
    "Name the key by its public id: the 12 lowercase letters and digits after `sk-tg-`, as GET /admin/keys lists them.",
    { param: "id" },
  );
}

/** Refuses body fields the schema does not name, naming the first one and the field meant. */
export function rejectUnknownFields(body: object, schema: TObject): void {
  const known = Object.keys(schema.properties);
  const unknown = Object.keys(body).find((field) => !known.includes(field));
  if (unknown !== undefined) {
    throw new AppError(
      "invalid_value",
      `Unknown field '${hideKeySecrets(unknown)}'.${describeSuggestion(unknown, known)} The fields are: ${known.join(", ")}.`,
      { param: hideKeySecrets(unknown) },
    );
  }
}

/** " Did you mean 'account'?" when the name is close to a known one, else "". */
export function describeSuggestion(name: string, known: readonly string[]): string {
  const suggestion = suggestName(name, known);
  return suggestion === undefined ? "" : ` Did you mean '${suggestion}'?`;
}

export function readInstant(field: string, text: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new AppError("invalid_value", `Invalid '${field}': ${reason}`, { param: field });
  }
}

/**
 * Runs an admin operation; an {@link AdminError} becomes the {@link AppError} the client sees,
 * its field named as the request names it (`paramOfField` adds names for this route).
 */
export async function mapAdminErrors<T>(
  operation: () => Promise<T>,
  paramOfField: Readonly<Record<string, string>> = {},
): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (!(error instanceof AdminError)) throw error;
    const field = error.field;
    const param = field === undefined ? undefined : (paramOfField[field] ?? PARAM_OF_FIELD[field] ?? field);
    const options = { param, cause: error };
    switch (error.kind) {
      case "not_found":
        throw new AppError("not_found", error.message, options);
      case "invalid_value":
      case "conflict":
        throw new AppError("invalid_value", error.message, options);
      default: {
        const unexpected: never = error.kind;
        throw new Error(`Unknown admin error kind ${String(unexpected)}`);
      }
    }
  }
}

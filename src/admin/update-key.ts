import type { ApiKeyChanges, ApiKeyRecord, Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { formatInstant } from "./format-table.ts";
import { resolveKeyReference } from "./read-key-reference.ts";
import {
  validateAllowedModels,
  validateExpiry,
  validateKeyName,
  validateLimit,
} from "./validate-key-settings.ts";

/**
 * New settings for a key, checked as `createKey` checks a new key's: a field left out (or
 * `undefined`) keeps its value; `null` clears it: `allowedModels` every model, `rpm` and `tpm`
 * no limit, `expiresAt` never. A name is never `null` (`""` clears it).
 */
export interface KeyUpdate {
  name?: string | undefined;
  allowedModels?: string[] | null | undefined;
  rpm?: number | null | undefined;
  tpm?: number | null | undefined;
  /** After now. */
  expiresAt?: Date | null | undefined;
}

/** Said when an update names no setting. */
export const NOTHING_TO_CHANGE = "Nothing to change: give a new name, models, rpm, tpm or expiry.";

/**
 * Changes the settings of the key named by its public id or by the whole key, keeping its
 * secret: its holder deploys nothing new. The caller then drops the key from caches (the
 * authenticator keeps a key's settings for at most 1 second), so the next request goes by the
 * new settings on every replica. An expired key may be given a later expiry, which makes it work
 * again.
 *
 * An admin key belongs to no account and may use no model, so it has no models and no rate
 * limits to change: only its name and expiry (`null` for models, rpm or tpm is what it has, and
 * passes). Throws an {@link AdminError}: `invalid_value` for text that names no key, an update
 * with nothing in it and settings that make no sense; `not_found` when no key has the public id;
 * `conflict` when the key is revoked (revocation is final: a revoked key keeps its settings).
 */
export async function updateKey(
  store: Store,
  publicIdOrKey: string,
  update: KeyUpdate,
  options: { now?: () => Date; knownModels?: readonly string[] } = {},
): Promise<ApiKeyRecord> {
  const publicId = await resolveKeyReference(store, publicIdOrKey);
  if (Object.values(update).every((value) => value === undefined)) {
    throw new AdminError("invalid_value", NOTHING_TO_CHANGE);
  }
  const now = (options.now ?? (() => new Date()))();
  const existing = await store.getApiKeyByPublicId(publicId);
  if (existing === undefined) throw notFound(publicId);
  if (existing.revokedAt !== undefined) throw revoked(publicId, existing.revokedAt);
  if (existing.role === "admin") refuseAdminKeyLimits(publicId, update);

  const changes: ApiKeyChanges = {};
  if (update.name !== undefined) changes.name = validateKeyName(update.name);
  if (update.allowedModels !== undefined) {
    changes.allowedModels =
      update.allowedModels === null ? null : validateAllowedModels(update.allowedModels, options.knownModels);
  }
  if (update.rpm !== undefined) {
    validateLimit("rpm", update.rpm ?? undefined);
    changes.rpm = update.rpm;
  }
  if (update.tpm !== undefined) {
    validateLimit("tpm", update.tpm ?? undefined);
    changes.tpm = update.tpm;
  }
  if (update.expiresAt !== undefined) {
    validateExpiry(update.expiresAt ?? undefined, now);
    changes.expiresAt = update.expiresAt;
  }

  const result = await store.updateApiKey(publicId, changes);
  switch (result.outcome) {
    case "updated":
      return result.key;
    case "revoked": {
      // Revoked since it was read above.
      const revokedAt = (await store.getApiKeyByPublicId(publicId))?.revokedAt;
      throw revoked(publicId, revokedAt);
    }
    case "not_found":
      throw notFound(publicId);
    default: {
      const unexpected: never = result;
      throw new Error(`Unexpected result ${JSON.stringify(unexpected)}`);
    }
  }
}

function notFound(publicId: string): AdminError {
  return new AdminError("not_found", `No key has the public id ${publicId}.`, { field: "key" });
}

function revoked(publicId: string, revokedAt: Date | undefined): AdminError {
  const when = revokedAt === undefined ? "" : ` at ${formatInstant(revokedAt)}`;
  return new AdminError(
    "conflict",
    `Key ${publicId} was revoked${when}, and a revoked key cannot be changed: make a new key instead.`,
    { field: "key" },
  );
}

/** Refuses models, rpm or tpm for an admin key, which has none (`null`, what it has, passes). */
function refuseAdminKeyLimits(publicId: string, update: KeyUpdate): void {
  const fields = [
    ["models", update.allowedModels],
    ["rpm", update.rpm],
    ["tpm", update.tpm],
  ] as const;
  const given = fields.find(([, value]) => value !== undefined && value !== null);
  if (given === undefined) return;
  throw new AdminError(
    "invalid_value",
    `Key ${publicId} is an admin key: it has no account, models or rate limits, so only its name and expiry can be changed.`,
    { field: given[0] },
  );
}

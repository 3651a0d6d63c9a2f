import { parseApiKey, verifySecret } from "../auth/api-key.ts";
import type { Store } from "../store/store.ts";

/** A configured admin key that is a stored key the store refuses, and why. */
export interface RefusedAdminKey {
  publicId: string;
  reason: "revoked" | "expired";
}

/**
 * The stored key that the configured `admin_key` is, when the store refuses it: revoked, or
 * expired at `now`. The authenticator refuses such a key (a revoked key never works again), so it
 * is no way in. `undefined` when the configured key is no stored key (a secret of the operator's
 * own, always taken) or a stored key that works.
 */
export async function findRefusedAdminKey(
  store: Store,
  configuredKey: string,
  now: Date,
): Promise<RefusedAdminKey | undefined> {
  const parsed = parseApiKey(configuredKey);
  if (parsed === undefined) return undefined;
  const record = await store.getApiKeyByPublicId(parsed.publicId);
  // Another secret under the same public id is not this key: the configured one then works.
  if (record === undefined || !verifySecret(parsed.secret, record.secretHash)) return undefined;
  if (record.revokedAt !== undefined) return { publicId: record.publicId, reason: "revoked" };
  if (record.expiresAt !== undefined && record.expiresAt.getTime() <= now.getTime()) {
    return { publicId: record.publicId, reason: "expired" };
  }
  return undefined;
}

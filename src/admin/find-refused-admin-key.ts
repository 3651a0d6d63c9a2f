import { parseApiKey, verifySecret } from "../auth/api-key.ts";
import type { Store } from "../store/store.ts";

/** A configured admin key that is a stored key the store refuses as an admin key, and why. */
export interface RefusedAdminKey {
  publicId: string;
  /** `user`: a user's key (the starter key printed beside the admin key, pasted in its place). */
  reason: "revoked" | "expired" | "user";
}

/**
 * The stored key that the configured `admin_key` is, when the store refuses it as an admin key:
 * revoked, expired at `now`, or a user's key. The authenticator refuses the first two (a revoked
 * key never works again) and takes a user's key as that user's only (it made its holder an
 * administrator: a customer credited its own account), so none is a way in. `undefined` when the
 * configured key is no stored key (a secret of the operator's own, always taken) or a stored
 * admin key that works.
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
  if (record.role !== "admin") return { publicId: record.publicId, reason: "user" };
  if (record.revokedAt !== undefined) return { publicId: record.publicId, reason: "revoked" };
  if (record.expiresAt !== undefined && record.expiresAt.getTime() <= now.getTime()) {
    return { publicId: record.publicId, reason: "expired" };
  }
  return undefined;
}

import type { Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { hasActiveAdminKey } from "./has-active-admin-key.ts";
import { resolveKeyReference } from "./read-key-reference.ts";

/** What {@link revokeKey} did. */
export interface RevokeKeyOutcome {
  publicId: string;
  /** `false` when the key had already been revoked (its first revocation time is kept). */
  newlyRevoked: boolean;
  /**
   * `true` when the key is an admin key and no admin key left in the store works: until a
   * restart makes a new one, the admin API takes only a configured `admin_key`.
   */
  lastAdminKey: boolean;
}

/**
 * Revokes the key named by its public id or by the whole key. Every replica refuses it within
 * 1 second (the authenticator's cache lifetime). Throws an {@link AdminError} when the text names
 * no key (`invalid_value`) or no such key exists (`not_found`).
 */
export async function revokeKey(
  store: Store,
  publicIdOrKey: string,
  options: { now?: () => Date } = {},
): Promise<RevokeKeyOutcome> {
  const publicId = await resolveKeyReference(store, publicIdOrKey);
  const now = (options.now ?? (() => new Date()))();
  const result = await store.revokeApiKey(publicId, now);
  switch (result) {
    case "revoked":
      return { publicId, newlyRevoked: true, lastAdminKey: await isLastAdminKey(store, publicId, now) };
    case "already_revoked":
      return { publicId, newlyRevoked: false, lastAdminKey: await isLastAdminKey(store, publicId, now) };
    case "not_found":
      throw new AdminError("not_found", `No key has the public id ${publicId}.`, { field: "key" });
    default: {
      const unexpected: never = result;
      throw new Error(`Unexpected result ${String(unexpected)}`);
    }
  }
}

/** Whether the (revoked) key is an admin key and the store has no other admin key that works. */
async function isLastAdminKey(store: Store, publicId: string, now: Date): Promise<boolean> {
  const record = await store.getApiKeyByPublicId(publicId);
  return record?.role === "admin" && !(await hasActiveAdminKey(store, now));
}

import type { Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";
import { KEY_REFERENCE_HINT, readKeyReference } from "./read-key-reference.ts";

/** What {@link revokeKey} did. */
export interface RevokeKeyOutcome {
  publicId: string;
  /** `false` when the key had already been revoked (its first revocation time is kept). */
  newlyRevoked: boolean;
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
  const publicId = readKeyReference(publicIdOrKey);
  if (publicId === undefined) throw new AdminError("invalid_value", KEY_REFERENCE_HINT, { field: "key" });
  const result = await store.revokeApiKey(publicId, (options.now ?? (() => new Date()))());
  switch (result) {
    case "revoked":
      return { publicId, newlyRevoked: true };
    case "already_revoked":
      return { publicId, newlyRevoked: false };
    case "not_found":
      throw new AdminError("not_found", `No key has the public id ${publicId}.`, { field: "key" });
    default: {
      const unexpected: never = result;
      throw new Error(`Unexpected result ${String(unexpected)}`);
    }
  }
}

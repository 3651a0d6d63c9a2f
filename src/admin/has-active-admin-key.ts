import type { Store } from "../store/store.ts";

/**
 * Whether the store holds an admin key that works at `now`: neither revoked nor expired. (A key
 * configured as `admin_key` is not in the store and does not count.)
 */
export async function hasActiveAdminKey(store: Store, now: Date): Promise<boolean> {
  // A store without any admin key (every one configured, or a first start) is told by one query.
  if (!(await store.hasAdminKey())) return false;
  const keys = await store.listApiKeys({ role: "admin" });
  return keys.some(
    (key) =>
      key.revokedAt === undefined && (key.expiresAt === undefined || key.expiresAt.getTime() > now.getTime()),
  );
}

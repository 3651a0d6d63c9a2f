import type { BootstrapResult } from "./bootstrap.ts";
import { nameAdminKeySource } from "./name-admin-key-source.ts";

/**
 * Warns at start when the configured admin key is a stored key that was revoked or has expired,
 * or a user's key (see {@link BootstrapResult.refusedAdminKey}): the admin API refuses it, so the
 * operator who holds only that key must learn where to change it. `configFile` is the config's
 * source.
 */
export function warnOfRefusedAdminKey(
  started: Pick<BootstrapResult, "adminKey" | "refusedAdminKey">,
  configFile: string | undefined,
  logger: { warn(details: object, message: string): void },
): void {
  const refused = started.refusedAdminKey;
  if (refused === undefined) return;
  const source = nameAdminKeySource(configFile);
  const what =
    refused.reason === "user"
      ? `${source} is the user key ${refused.publicId}, not an admin key: it stays that user's key, and the admin API refuses it.`
      : `${source} is the stored admin key ${refused.publicId}, which ${refused.reason === "revoked" ? "was revoked" : "has expired"}: the admin API refuses it.`;
  logger.warn(
    { publicId: refused.publicId, reason: refused.reason },
    `${what} ${
      started.adminKey === undefined
        ? "Put an admin key that works there (the store holds one), or remove it"
        : "Put the new admin key printed at this start there, or remove it"
    }`,
  );
}

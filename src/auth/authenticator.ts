import { AppError } from "../errors/app-error.ts";
import type { ApiKeyRecord, Store } from "../store/store.ts";
import { hashSecret, parseApiKey, verifySecret } from "./api-key.ts";
import type { AuthenticatedKey } from "./authenticated-key.ts";

/**
 * Checks the `Authorization` header of every request.
 *
 * Hot path: the key's row is looked up by public id and kept in a small in-memory cache for at
 * most `cacheTtlMilliseconds` (1 s), so a revocation made anywhere (CLI, admin API, another
 * replica) takes effect within 1 s without a store query per request. Concurrent requests with
 * the same key share one lookup. The secret is still hashed and compared, in constant time, on
 * every request; revocation and expiry are checked on every request against the cached row.
 */
export interface Authenticator {
  /**
   * The key of `authorizationHeader` (`Bearer sk-tg-...`), or an `AppError("invalid_api_key")`
   * when the header is missing, not `Bearer`, malformed, or names an unknown, revoked or expired
   * key or a wrong secret.
   */
  authenticate(authorizationHeader: string | undefined): Promise<AuthenticatedKey>;
  /** Drops the cached row of one key (or of every key), e.g. right after revoking it here. */
  forget(publicId?: string): void;
}

/** Options of {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  store: Pick<Store, "getApiKeyByPublicId">;
  /**
   * An admin key from the configuration (`admin_key`, `TOLLGATE_ADMIN_KEY`): any string,
   * accepted as an admin key without an account. `undefined` when none is configured.
   */
  configuredAdminKey?: string | undefined;
  /** The wall clock, in milliseconds since the epoch, for keys' expiry. Default `Date.now`. */
  now?: () => number;
  /**
   * A steady clock, in milliseconds, for the cache's ages: the wall clock may step (NTP, a
   * resumed VM), and a step back must not keep a revoked key's row trusted. Default
   * `performance.now`.
   */
  steadyNow?: () => number;
  /** How long a looked-up row is trusted, in milliseconds. Default 1000; at most 1000. */
  cacheTtlMilliseconds?: number;
  /** Rows kept at most; the oldest is dropped beyond this. Default 10,000. */
  cacheSize?: number;
}

const HOW_TO_PASS = "Pass a valid key as `Authorization: Bearer sk-tg-...`.";
const MISSING_KEY = `No API key provided. ${HOW_TO_PASS}`;
const NOT_BEARER = "The Authorization header must use the Bearer scheme: `Authorization: Bearer sk-tg-...`.";
const MALFORMED_KEY = `Incorrect API key provided: it is not shaped like a Tollgate key. ${HOW_TO_PASS}`;
const INCORRECT_KEY = `Incorrect API key provided. ${HOW_TO_PASS}`;
const REVOKED_OR_EXPIRED =
  "This API key has been revoked or has expired. Ask your administrator for a new key and pass it as `Authorization: Bearer sk-tg-...`.";
/** An admin key's holder is the administrator: told where admin keys come from instead. */
const REVOKED_OR_EXPIRED_ADMIN =
  "This admin key has been revoked or has expired. Use another admin key, give the server a new admin_key (or TOLLGATE_ADMIN_KEY), or restart a server that takes no admin key any more: it makes one and prints it.";

/** What the cache keeps of a key: the answer to give, and what to check on every request. */
interface CachedKey {
  key: AuthenticatedKey;
  secretHash: Buffer;
  revoked: boolean;
  /** Milliseconds since the epoch, or `undefined` for never. */
  expiresAt: number | undefined;
}

interface CacheEntry {
  fetchedAt: number;
  lookup: Promise<CachedKey | undefined>;
}

export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const { store } = options;
  const now = options.now ?? Date.now;
  const steadyNow = options.steadyNow ?? (() => performance.now());
  const ttl = Math.min(options.cacheTtlMilliseconds ?? 1000, 1000);
  const cacheSize = options.cacheSize ?? 10_000;
  const cache = new Map<string, CacheEntry>();
  const configuredAdmin = describeConfiguredAdminKey(options.configuredAdminKey);

  function lookUp(publicId: string): Promise<CachedKey | undefined> {
    const time = steadyNow();
    const entry = cache.get(publicId);
    if (entry !== undefined && time - entry.fetchedAt < ttl) return entry.lookup;
    if (entry !== undefined) cache.delete(publicId);
    else if (cache.size >= cacheSize) {
      // Maps iterate in insertion order: the first key is the oldest entry.
      const oldest = cache.keys().next();
      if (oldest.done !== true) cache.delete(oldest.value);
    }
    // The entry's age counts from before the query, so a revocation that commits while the
    // query runs is still seen within the TTL.
    const lookup = store.getApiKeyByPublicId(publicId).then(toCachedKey);
    const created: CacheEntry = { fetchedAt: time, lookup };
    cache.set(publicId, created);
    lookup.catch(() => {
      // A failed lookup is not remembered: the next request asks the store again.
      if (cache.get(publicId) === created) cache.delete(publicId);
    });
    return lookup;
  }

  function isRevokedOrExpired(key: CachedKey): boolean {
    return key.revoked || (key.expiresAt !== undefined && key.expiresAt <= now());
  }

  /**
   * The key in the store that the configured admin key also is (the admin key a first start
   * printed, pasted into the config), if any. A store that cannot answer does not lock the
   * configured key out: it is the way in when nothing else works.
   */
  async function findStored(parsed: { publicId: string; secret: string }): Promise<CachedKey | undefined> {
    let stored: CachedKey | undefined;
    try {
      stored = await lookUp(parsed.publicId);
    } catch {
      return undefined;
    }
    return stored !== undefined && verifySecret(parsed.secret, stored.secretHash) ? stored : undefined;
  }

  return {
    async authenticate(authorizationHeader: string | undefined): Promise<AuthenticatedKey> {
      const token = readBearerToken(authorizationHeader);
      const parsed = parseApiKey(token);
      // Compare with the configured admin key only when it could match: a well-formed key with
      // another public id cannot, and skipping it saves a hash per request. What the timing
      // tells is only the configured key's public id, which is not secret.
      if (
        configuredAdmin !== undefined &&
        (parsed === undefined || parsed.publicId === configuredAdmin.publicId) &&
        verifySecret(token, configuredAdmin.digest)
      ) {
        const stored = parsed === undefined ? undefined : await findStored(parsed);
        if (stored === undefined) return configuredAdmin.key;
        // Revoked there or expired: an operator who revokes a leaked key expects it refused.
        if (stored.key.role === "admin") {
          if (isRevokedOrExpired(stored)) throw new AppError("invalid_api_key", REVOKED_OR_EXPIRED_ADMIN);
          return configuredAdmin.key;
        }
        // A user's key (the starter key pasted in the admin key's place) stays that user's key
        // (a start warns): it made its holder an administrator, who credited its own account.
      }
      if (parsed === undefined) throw new AppError("invalid_api_key", MALFORMED_KEY);
      const cached = await lookUp(parsed.publicId);
      if (cached === undefined || !verifySecret(parsed.secret, cached.secretHash)) {
        throw new AppError("invalid_api_key", INCORRECT_KEY);
      }
      // Only a caller holding the right secret learns that the key was revoked or has expired.
      if (isRevokedOrExpired(cached)) {
        throw new AppError(
          "invalid_api_key",
          cached.key.role === "admin" ? REVOKED_OR_EXPIRED_ADMIN : REVOKED_OR_EXPIRED,
        );
      }
      return cached.key;
    },

    forget(publicId?: string): void {
      if (publicId === undefined) cache.clear();
      else cache.delete(publicId);
    },
  };
}

/** What the authenticator needs of the configured admin key, or `undefined` when there is none. */
function describeConfiguredAdminKey(
  configuredKey: string | undefined,
): { digest: Buffer; publicId: string | undefined; key: AuthenticatedKey } | undefined {
  if (configuredKey === undefined || configuredKey === "") return undefined;
  // Set when the configured key is shaped like a Tollgate key.
  const publicId = parseApiKey(configuredKey)?.publicId;
  return {
    digest: Buffer.from(hashSecret(configuredKey), "hex"),
    publicId,
    key: freezeKey({
      publicId: publicId ?? "admin",
      accountId: undefined,
      role: "admin",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      name: "configured admin key",
    }),
  };
}

/** The token of a `Bearer` header (the scheme is case-insensitive, as HTTP says). */
function readBearerToken(header: string | undefined): string {
  const parts = splitAuthorization(header);
  if (parts === undefined) throw new AppError("invalid_api_key", MISSING_KEY);
  if (parts.scheme.toLowerCase() !== "bearer") throw new AppError("invalid_api_key", NOT_BEARER);
  if (parts.token === "") throw new AppError("invalid_api_key", MISSING_KEY);
  return parts.token;
}

/**
 * An `Authorization` header's scheme and what follows it (spaces around both dropped, spaces
 * inside the token kept), as every route that takes a key reads it; `undefined` when it is
 * missing or blank.
 */
export function splitAuthorization(
  header: string | undefined,
): { scheme: string; token: string } | undefined {
  const trimmed = header?.trim() ?? "";
  if (trimmed === "") return undefined;
  const space = trimmed.search(/\s/);
  return space === -1
    ? { scheme: trimmed, token: "" }
    : { scheme: trimmed.slice(0, space), token: trimmed.slice(space).trim() };
}

function toCachedKey(record: ApiKeyRecord | undefined): CachedKey | undefined {
  if (record === undefined) return undefined;
  return {
    key: freezeKey({
      publicId: record.publicId,
      accountId: record.accountId,
      role: record.role,
      allowedModels: record.allowedModels,
      rpm: record.rpm,
      tpm: record.tpm,
      name: record.name,
    }),
    secretHash: Buffer.from(record.secretHash, "hex"),
    revoked: record.revokedAt !== undefined,
    expiresAt: record.expiresAt?.getTime(),
  };
}

/** The same object answers many requests: freeze it so no request can change it for others. */
function freezeKey(key: AuthenticatedKey): AuthenticatedKey {
  if (key.allowedModels !== undefined) Object.freeze(key.allowedModels);
  return Object.freeze(key);
}

/**
 * The persistent state of Tollgate behind one narrow interface. Services decide (ids,
 * timestamps, validation); a store writes what it is given and reads it back. Every backend
 * (SQLite now, PostgreSQL later) passes the same conformance suite
 * (`test/store/store-conformance.ts`).
 */

/** What a key may do: `user` keys call the API for their account, `admin` keys call `/admin`. */
export type KeyRole = "user" | "admin";

/** An account: the holder of a balance that requests are charged to. */
export interface Account {
  /** A UUID. */
  id: string;
  /** Unique, chosen by the operator. */
  name: string;
  /** Integer nano-units (1 currency unit = 1,000,000,000). */
  balanceNano: bigint;
  createdAt: Date;
}

/** An API key as stored: never the secret itself, only its hash. */
export interface ApiKeyRecord {
  /** A UUID. */
  id: string;
  /** The `<publicId>` of `sk-tg-<publicId>-<secret>`; unique, safe to show and log. */
  publicId: string;
  /** The account the key spends from; `undefined` only for admin keys. */
  accountId: string | undefined;
  role: KeyRole;
  /** A label chosen by the operator; may be empty. */
  name: string;
  /** Lowercase hex SHA-256 of the secret part. */
  secretHash: string;
  /** Model ids the key may use; `undefined` means every model. */
  allowedModels: string[] | undefined;
  /** Requests per minute; `undefined` means no limit. */
  rpm: number | undefined;
  /** Tokens per minute; `undefined` means no limit. */
  tpm: number | undefined;
  /** The key stops working at this instant; `undefined` means never. */
  expiresAt: Date | undefined;
  /** When the key was revoked; `undefined` while it is not. */
  revokedAt: Date | undefined;
  createdAt: Date;
}

/** The outcome of {@link Store.insertAccount}. */
export type InsertAccountResult = "created" | "name_taken";

/** The outcome of {@link Store.revokeApiKey}. */
export type RevokeApiKeyResult = "revoked" | "already_revoked" | "not_found";

/** Filters of {@link Store.listApiKeys}. */
export interface ApiKeyFilter {
  /** Only the keys of this account. */
  accountId?: string;
}

export interface Store {
  /**
   * Inserts a new account with its opening balance (once billing exists, recorded as the
   * account's first credit in the same transaction). Answers `"name_taken"`, writing nothing,
   * when another account has the name.
   */
  insertAccount(account: Account): Promise<InsertAccountResult>;
  getAccountById(id: string): Promise<Account | undefined>;
  getAccountByName(name: string): Promise<Account | undefined>;
  /** Every account, oldest first (by name among accounts made in the same millisecond). */
  listAccounts(): Promise<Account[]>;
  /** Whether any account exists. */
  hasAccounts(): Promise<boolean>;

  /** Inserts a new key. Its account must exist; its public id must be new. */
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  /** The key with this public id, revoked and expired ones included. */
  getApiKeyByPublicId(publicId: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Keys, oldest first (by public id among keys made in the same millisecond), revoked and
   * expired ones included.
   */
  listApiKeys(filter?: ApiKeyFilter): Promise<ApiKeyRecord[]>;
  /** Marks the key revoked at `revokedAt`; a key already revoked keeps its first time. */
  revokeApiKey(publicId: string, revokedAt: Date): Promise<RevokeApiKeyResult>;
  /** Whether any admin key exists, revoked and expired ones included. */
  hasAdminKey(): Promise<boolean>;

  /** Closes the connection; the store cannot be used afterwards. */
  close(): Promise<void>;
}

import type { ColumnType } from "kysely";

/**
 * The tables as kysely sees them, shared by every SQL backend.
 *
 * Dialect-neutral conventions (the same migrations and queries run on SQLite and PostgreSQL):
 * - ids are text (UUIDs made by the services; `public_id` for keys);
 * - every integer column is declared `bigint` and read as a JS `bigint` (SQLite through
 *   `readBigInts`, PostgreSQL through an int8 parser), money included: `*_nano` columns hold
 *   integer nano-units;
 * - timestamps are text in ISO 8601 UTC with milliseconds (`2025-01-31T12:00:00.000Z`), which
 *   compare and sort correctly as text in both dialects;
 * - lists are JSON text.
 */
export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
}

export interface AccountsTable {
  id: string;
  name: string;
  /** Nano-units; defaults to 0. */
  balance_nano: ColumnType<bigint, bigint | undefined, bigint>;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  /** The `<publicId>` of `sk-tg-<publicId>-<secret>`: 12 characters `[a-z0-9]`, unique. */
  public_id: string;
  /** `null` only for admin keys. */
  account_id: string | null;
  role: "user" | "admin";
  name: string;
  /** Lowercase hex SHA-256 of the secret part. */
  secret_hash: string;
  /** JSON array of model ids, or `null` for every model. */
  allowed_models: string | null;
  /** Requests per minute, or `null` for no limit. */
  rpm: bigint | null;
  /** Tokens per minute, or `null` for no limit. */
  tpm: bigint | null;
  expires_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

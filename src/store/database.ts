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
  credits: CreditsTable;
  reservations: ReservationsTable;
  usage: UsageTable;
}

export interface AccountsTable {
  id: string;
  name: string;
  /** Nano-units; defaults to 0. */
  balance_nano: ColumnType<bigint, bigint | undefined, bigint>;
  /** Nano-units: the sum of the account's open reservations; defaults to 0. */
  reserved_nano: ColumnType<bigint, bigint | undefined, bigint>;
  /** Nano-units: the sum of the account's usage rows' costs (what it was charged); defaults to 0. */
  spent_nano: ColumnType<bigint, bigint | undefined, bigint>;
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

/** Money added to an account; the opening balance is the credit whose id is the account's id. */
export interface CreditsTable {
  id: string;
  account_id: string;
  /** Nano-units. */
  amount_nano: bigint;
  note: string | null;
  created_at: string;
}

/** Money set aside for a running request. */
export interface ReservationsTable {
  /** Made by the server; the usage row that settles it has the same id. */
  id: string;
  /** The `x-request-id`; not unique. */
  request_id: string;
  account_id: string;
  key_public_id: string;
  model: string;
  /** Nano-units. */
  amount_nano: bigint;
  replica_id: string;
  lease_expires_at: string;
  created_at: string;
}

/** The usage ledger: one row per settled or refused request. */
export interface UsageTable {
  /** The id of the reservation it settles (or a new one for a refused request). */
  id: string;
  /** The `x-request-id`; not unique. */
  request_id: string;
  account_id: string;
  key_public_id: string;
  model: string;
  prompt_tokens: bigint;
  completion_tokens: bigint;
  /** Nano-units charged to the account. */
  cost_nano: bigint;
  finish_reason: string | null;
  error_code: string | null;
  /** The client's `user` field. A reserved word in PostgreSQL: kysely always quotes it. */
  user: string | null;
  queue_ms: bigint | null;
  first_token_ms: bigint | null;
  total_ms: bigint;
  /** 1 when the token counts were estimated, else 0. */
  estimated: bigint;
  created_at: string;
}

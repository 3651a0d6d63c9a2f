/** Conversions between the billing records of `store.ts` and their rows (see `database.ts`). */
import type { Insertable, Selectable } from "kysely";
import {
  fromTimestampText,
  MAX_BIGINT_COLUMN,
  readBigInt,
  toCountColumn,
  toMillisecondsColumn,
  toTimestampText,
} from "./column-values.ts";
import type { CreditsTable, ReservationsTable, UsageTable } from "./database.ts";
import type { CreditRecord, Reservation, UsageRecord } from "./store.ts";

export function toReservationRow(reservation: Reservation): Insertable<ReservationsTable> {
  return {
    id: reservation.id,
    request_id: reservation.requestId,
    account_id: reservation.accountId,
    key_public_id: reservation.keyPublicId,
    model: reservation.model,
    amount_nano: reservation.amountNano,
    replica_id: reservation.replicaId,
    lease_expires_at: toTimestampText(reservation.leaseExpiresAt),
    created_at: toTimestampText(reservation.createdAt),
  };
}

export function toReservation(row: Selectable<ReservationsTable>): Reservation {
  return {
    id: row.id,
    requestId: row.request_id,
    accountId: row.account_id,
    keyPublicId: row.key_public_id,
    model: row.model,
    amountNano: readBigInt(row.amount_nano),
    replicaId: row.replica_id,
    leaseExpiresAt: fromTimestampText(row.lease_expires_at),
    createdAt: fromTimestampText(row.created_at),
  };
}

/**
 * The usage record as a settle writes it: a cost above the largest amount a column holds
 * (2^63 − 1 nano-units, the cost of an upstream that reported an absurd token count) is capped
 * there, so that it can be bound at all. No balance is that large, so the charge is then capped
 * again at what the account has available, as any cost above its reservation is, and the usage
 * row records that charge.
 */
export function capUsageCost(usage: UsageRecord): UsageRecord {
  return usage.costNano > MAX_BIGINT_COLUMN ? { ...usage, costNano: MAX_BIGINT_COLUMN } : usage;
}

export function toUsageRow(usage: UsageRecord): Insertable<UsageTable> {
  return {
    id: usage.id,
    request_id: usage.requestId,
    account_id: usage.accountId,
    key_public_id: usage.keyPublicId,
    model: usage.model,
    prompt_tokens: toCountColumn("promptTokens", usage.promptTokens),
    completion_tokens: toCountColumn("completionTokens", usage.completionTokens),
    cost_nano: usage.costNano,
    finish_reason: usage.finishReason ?? null,
    error_code: usage.errorCode ?? null,
    user: usage.user ?? null,
    queue_ms: usage.queueMs === undefined ? null : toMillisecondsColumn("queueMs", usage.queueMs),
    first_token_ms:
      usage.firstTokenMs === undefined ? null : toMillisecondsColumn("firstTokenMs", usage.firstTokenMs),
    total_ms: toMillisecondsColumn("totalMs", usage.totalMs),
    estimated: usage.estimated ? 1n : 0n,
    created_at: toTimestampText(usage.createdAt),
  };
}

export function toUsageRecord(row: Selectable<UsageTable>): UsageRecord {
  return {
    id: row.id,
    requestId: row.request_id,
    accountId: row.account_id,
    keyPublicId: row.key_public_id,
    model: row.model,
    promptTokens: Number(row.prompt_tokens),
    completionTokens: Number(row.completion_tokens),
    costNano: readBigInt(row.cost_nano),
    finishReason: row.finish_reason ?? undefined,
    errorCode: row.error_code ?? undefined,
    user: row.user ?? undefined,
    queueMs: row.queue_ms === null ? undefined : Number(row.queue_ms),
    firstTokenMs: row.first_token_ms === null ? undefined : Number(row.first_token_ms),
    totalMs: Number(row.total_ms),
    estimated: readBigInt(row.estimated) !== 0n,
    createdAt: fromTimestampText(row.created_at),
  };
}

export function toCreditRow(credit: CreditRecord): Insertable<CreditsTable> {
  return {
    id: credit.id,
    account_id: credit.accountId,
    amount_nano: credit.amountNano,
    note: credit.note ?? null,
    created_at: toTimestampText(credit.createdAt),
  };
}

export function toCreditRecord(row: Selectable<CreditsTable>): CreditRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    amountNano: readBigInt(row.amount_nano),
    note: row.note ?? undefined,
    createdAt: fromTimestampText(row.created_at),
  };
}

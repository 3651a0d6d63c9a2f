import { randomUUID } from "node:crypto";
import type { Account, ApiKeyRecord, CreditRecord, Reservation, UsageRecord } from "../../src/store/store.ts";

/** A fixed instant the fixtures default to. */
export const T0 = new Date("2025-01-01T00:00:00.000Z");

let counter = 0;

export function makeAccount(overrides: Partial<Account> & { name: string }): Account {
  return {
    id: randomUUID(),
    balanceNano: 0n,
    createdAt: T0,
    ...overrides,
  };
}

export function makeKey(overrides: Partial<ApiKeyRecord>): ApiKeyRecord {
  counter += 1;
  return {
    id: randomUUID(),
    publicId: `key${String(counter).padStart(9, "0")}`,
    accountId: undefined,
    role: "user",
    name: "",
    secretHash: "a".repeat(64),
    allowedModels: undefined,
    rpm: undefined,
    tpm: undefined,
    expiresAt: undefined,
    revokedAt: undefined,
    createdAt: T0,
    ...overrides,
  };
}

export function makeReservation(overrides: Partial<Reservation> & { accountId: string }): Reservation {
  return {
    id: randomUUID(),
    requestId: "req_test",
    keyPublicId: "keytest00001",
    model: "test-model",
    amountNano: 0n,
    replicaId: "replica-a",
    leaseExpiresAt: new Date("2025-01-01T00:01:00.000Z"),
    createdAt: T0,
    ...overrides,
  };
}

/** The usage row that settles `reservation` (same id, account, key and model). */
export function makeUsage(overrides: Partial<UsageRecord> & { accountId: string }): UsageRecord {
  return {
    id: randomUUID(),
    requestId: "req_test",
    keyPublicId: "keytest00001",
    model: "test-model",
    promptTokens: 10,
    completionTokens: 5,
    costNano: 0n,
    finishReason: "stop",
    errorCode: undefined,
    user: undefined,
    queueMs: 1,
    firstTokenMs: 2,
    totalMs: 3,
    estimated: false,
    createdAt: T0,
    ...overrides,
  };
}

/** The usage row that settles `reservation`, at `costNano`. */
export function makeSettlement(
  reservation: Reservation,
  costNano: bigint,
  overrides: Partial<UsageRecord> = {},
): UsageRecord {
  return makeUsage({
    id: reservation.id,
    requestId: reservation.requestId,
    accountId: reservation.accountId,
    keyPublicId: reservation.keyPublicId,
    model: reservation.model,
    costNano,
    ...overrides,
  });
}

export function makeCredit(
  overrides: Partial<CreditRecord> & { accountId: string; amountNano: bigint },
): CreditRecord {
  return {
    id: randomUUID(),
    note: undefined,
    createdAt: T0,
    ...overrides,
  };
}

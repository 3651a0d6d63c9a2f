import { type Kysely, sql } from "kysely";
import type { Database } from "../database.ts";
import type { CommitCheck } from "../kysely-billing.ts";

/**
 * PostgreSQL's {@link CommitCheck}: a transaction's id (`txid_current()`, which assigns one to a
 * transaction that has none yet) and, later, from any connection, whether it committed
 * (`txid_status`: `committed`, `aborted` or `in progress`, the last also for a transaction whose
 * connection was cut before its COMMIT reached the server). The `txid_` functions, not their
 * PostgreSQL 13 names (`pg_current_xact_id`, `pg_xact_status`): every version since 10 has them,
 * and a credit must not fail on a server that lacks the new ones.
 */
export const postgresCommitCheck: CommitCheck = {
  async readTransactionId(transaction: Kysely<Database>): Promise<string> {
    const { rows } = await sql<{ id: string }>`select txid_current()::text as id`.execute(transaction);
    const id = rows[0]?.id;
    if (id === undefined) throw new Error("PostgreSQL did not tell the transaction's id.");
    return id;
  },

  async hasCommitted(db: Kysely<Database>, transactionId: string): Promise<boolean> {
    const { rows } = await sql<{ status: string | null }>`
      select txid_status(${transactionId}::bigint) as status`.execute(db);
    return rows[0]?.status === "committed";
  },
};

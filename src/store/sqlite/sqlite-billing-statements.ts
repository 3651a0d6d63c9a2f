import type { StatementSync } from "node:sqlite";
import type { CompiledQuery, Kysely } from "kysely";
import { createQueryTemplate, type TemplateParameter } from "../create-query-template.ts";
import type { Database } from "../database.ts";
import { compileHotQueries } from "../reserve-settle-shared.ts";
import { type NodeSqliteDatabase, toSqlParameters } from "./node-sqlite-database.ts";

/**
 * The statements of the SQLite billing batch (sqlite-billing-batch.ts), built once: the query
 * templates, and `run`/`all`/`execute`, which run SQL directly on `node:sqlite` through a cache of
 * prepared statements (kysely's per-call machinery cost more than the statements).
 */
export function createBillingStatements(db: Kysely<Database>, database: NodeSqliteDatabase) {
  const queries = compileHotQueries(db);
  const findAccount = createQueryTemplate((parameter: TemplateParameter<{ accountId: string }>) =>
    db.selectFrom("accounts").select("id").where("id", "=", parameter("accountId")),
  );
  /** The account's money, and whether a reservation row has the id already: one statement. */
  const readAccountMoney = createQueryTemplate(
    (parameter: TemplateParameter<{ accountId: string; id: string }>) =>
      db
        .selectFrom("accounts")
        .select((eb) => [
          "balance_nano",
          "reserved_nano",
          eb.exists(eb.selectFrom("reservations").select("id").where("id", "=", parameter("id"))).as("taken"),
        ])
        .where("id", "=", parameter("accountId")),
  );
  /** Sets `amount` aside if the available balance, less what is held in memory, covers it. */
  const setAsideBeside = createQueryTemplate(
    (parameter: TemplateParameter<{ accountId: string; amount: bigint; needed: bigint }>) =>
      db
        .updateTable("accounts")
        .set((eb) => ({ reserved_nano: eb("reserved_nano", "+", parameter("amount")) }))
        .where("id", "=", parameter("accountId"))
        .where((eb) => eb(eb("balance_nano", "-", eb.ref("reserved_nano")), ">=", parameter("needed"))),
  );
  /** Moves a held reservation's money into the reserved column (it was checked when held). */
  const addReserved = createQueryTemplate(
    (parameter: TemplateParameter<{ accountId: string; amount: bigint }>) =>
      db
        .updateTable("accounts")
        .set((eb) => ({ reserved_nano: eb("reserved_nano", "+", parameter("amount")) }))
        .where("id", "=", parameter("accountId")),
  );

  const listReservationIds = createQueryTemplate((_parameter: TemplateParameter<Record<string, never>>) =>
    db.selectFrom("reservations").select("id"),
  );

  const statements = new Map<string, StatementSync>();
  function statementOf(sql: string): StatementSync {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = database.prepareDirect(sql);
      statements.set(sql, statement);
    }
    return statement;
  }
  function run(query: CompiledQuery<unknown>): number {
    const parameters = toSqlParameters(query.parameters);
    try {
      return Number(statementOf(query.sql).run(...parameters).changes);
    } catch (error) {
      throw database.explain(error);
    }
  }
  function all(query: CompiledQuery<unknown>): Record<string, unknown>[] {
    const parameters = toSqlParameters(query.parameters);
    try {
      return statementOf(query.sql).all(...parameters);
    } catch (error) {
      throw database.explain(error);
    }
  }
  function execute(sql: string): void {
    try {
      statementOf(sql).run();
    } catch (error) {
      throw database.explain(error);
    }
  }

  // `queries` are shared with the kysely stores (kysely-billing.ts); `templates` are SQLite's own.
  const templates = { findAccount, readAccountMoney, setAsideBeside, addReserved, listReservationIds };
  return { queries, templates, run, all, execute };
}

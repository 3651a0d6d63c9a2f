import {
  type DatabaseIntrospector,
  type Kysely,
  PostgresDialect,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from "kysely";

/**
 * kysely's `PostgresDialect` with an introspector that sees only the connection's current schema.
 *
 * Only the migrator introspects (to find its own tables). kysely's own introspector lists every
 * column of every schema and looks each schema up by name (`has_schema_privilege(nspname, ...)`),
 * so a schema dropped by another session meanwhile (a test run's, another application's) fails
 * the whole migration with "schema ... does not exist". Tollgate's tables, its migration tables
 * included, all live in the current schema, so that is all the migrator needs to see.
 */
export class PostgresStoreDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

class CurrentSchemaIntrospector implements DatabaseIntrospector {
  readonly #db: Kysely<unknown>;

  constructor(db: Kysely<unknown>) {
    this.#db = db;
  }

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(
      this.#db,
    );
    return rows;
  }

  /** The tables and views of the current schema, without their columns (nothing here reads them). */
  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; kind: string }>`
      select c.relname as name, n.nspname as schema, c.relkind as kind
      from pg_catalog.pg_class c
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v', 'f')
      order by c.relname
    `.execute(this.#db);
    return rows.map((row) => ({
      name: row.name,
      schema: row.schema,
      isView: row.kind === "v",
      isForeign: row.kind === "f",
      columns: [],
    }));
  }
}

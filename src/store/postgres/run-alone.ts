import { createHash } from "node:crypto";
import { type Kysely, sql } from "kysely";
import type { Database } from "../database.ts";

/**
 * `Store.runAlone` on PostgreSQL: `work` runs while this process holds a session advisory lock
 * keyed by the schema and the work's name, on a connection the pool lends for as long (the work's
 * own statements take others). Other replicas wait for it, as they wait for a migration; a
 * replica that dies meanwhile lets go of the lock with its connection.
 */
export function createRunAlone(db: Kysely<Database>, schema: string | undefined) {
  return async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const key = createHash("sha256")
      .update(`tollgate.alone:${schema ?? ""}:${name}`)
      .digest()
      .readBigInt64BE(0);
    return db.connection().execute(async (connection) => {
      await sql`select pg_advisory_lock(${key})`.execute(connection);
      try {
        return await work();
      } finally {
        await sql`select pg_advisory_unlock(${key})`.execute(connection).catch(() => {
          // A broken connection took the lock with it.
        });
      }
    });
  };
}

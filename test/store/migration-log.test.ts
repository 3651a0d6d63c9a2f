/**
 * A server that migrates its store says so before it starts and when it is done: a migration over
 * a large usage table takes seconds to minutes, and a server that logged nothing meanwhile looked
 * hung (regression: 7.9 s of silence on three million usage rows). A store that is current logs
 * nothing about it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { startServer } from "../../src/server.ts";
import type { Migrating } from "../../src/store/migrate-to-latest.ts";
import { migrations } from "../../src/store/migrations/migrations.ts";
import { openStore } from "../../src/store/open-store.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig } from "../support/test-server.ts";
import { createPostgresTestSchema, runStatements, testPostgresUrl } from "./postgres-test-database.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-migration-log-"));
const postgres = await createPostgresTestSchema();
afterAll(async () => {
  if (!("skipped" in postgres)) await postgres.drop();
  rmSync(folder, { recursive: true, force: true });
});

const every = Object.keys(migrations);

/** Starts and stops a server on `file`, and answers what it logged about its store. */
async function storeLinesOfStart(
  file: string,
): Promise<{ msg: string; migrations?: string[]; durationMs?: number }[]> {
  const { lines, destination } = collectLogLines<{
    msg: string;
    migrations?: string[];
    durationMs?: number;
  }>();
  const server = await startServer({
    config: createTestConfig({ database: `sqlite:${file}`, models: [], adminKey: "test-admin-key" }),
    logger: { destination },
  });
  await server.close();
  return lines.filter((line) => /\bstore\b/.test(line.msg));
}

describe("a server's start on a store that needs migrating", () => {
  it("logs creating a new store, upgrading an older one, and nothing for a current one", async () => {
    const file = join(folder, "t.db");
    const created = await storeLinesOfStart(file);
    expect(created.map((line) => line.msg)).toEqual(["creating the store's tables", "the store is created"]);
    expect(created[0]?.migrations).toEqual(every);
    expect(created[1]?.durationMs).toBeGreaterThanOrEqual(0);

    expect(await storeLinesOfStart(file)).toEqual([]);

    const older = new DatabaseSync(file);
    older.exec("drop index api_keys_created_at_public_id_index");
    older.exec("delete from kysely_migration where name = '006_keys_by_creation'");
    older.close();
    const upgraded = await storeLinesOfStart(file);
    expect(upgraded.map((line) => line.msg)).toEqual([
      expect.stringMatching(
        /^migrating the store to this version's schema \(a large usage table takes a while/,
      ),
      "the store is migrated",
    ]);
    expect(upgraded[0]?.migrations).toEqual(["006_keys_by_creation"]);
    expect(upgraded[1]?.durationMs).toBeGreaterThanOrEqual(0);
  });
});

describe.skipIf("skipped" in postgres)("openStore on PostgreSQL", () => {
  it("tells which migrations are pending, once, before they run", async () => {
    if ("skipped" in postgres) return;
    const told: Migrating[] = [];
    const onMigrating = (migrating: Migrating) => told.push(migrating);
    await (await openStore(postgres.url, { onMigrating })).close();
    expect(told).toEqual([{ pending: every, created: true }]);

    await (await openStore(postgres.url, { onMigrating })).close();
    expect(told).toHaveLength(1);

    await runStatements(testPostgresUrl(), [
      `drop index ${postgres.schema}.api_keys_created_at_public_id_index`,
      `delete from ${postgres.schema}.kysely_migration where name = '006_keys_by_creation'`,
    ]);
    await (await openStore(postgres.url, { onMigrating })).close();
    expect(told).toEqual([
      { pending: every, created: true },
      { pending: ["006_keys_by_creation"], created: false },
    ]);
  });
});

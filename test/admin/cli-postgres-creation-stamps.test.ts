/**
 * On PostgreSQL, accounts and keys that the CLI makes take the database's time, as the servers'
 * do (store/postgres/creation-stamps.ts): the CLI may run on a machine whose clock is behind the
 * replicas', and a follower of the admin listings' `next_after` then missed what it made.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { runCli } from "../support/run-cli.ts";

const postgres = await createPostgresTestSchema();
if ("skipped" in postgres)
  console.warn(`Skipping the PostgreSQL CLI creation stamp tests: ${postgres.skipped}.`);
const describeWithPostgres = "skipped" in postgres ? describe.skip : describe;

const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-creation-stamps-"));

afterAll(async () => {
  rmSync(folder, { recursive: true, force: true });
  if (!("skipped" in postgres)) await postgres.drop();
});

/** An hour behind: whatever the CLI stamps with its own clock is that far from the database's. */
const SKEW_MS = -3_600_000;

describeWithPostgres("accounts and keys made by the CLI on PostgreSQL", () => {
  it("are stamped with the database's time, not the CLI machine's clock", async () => {
    if ("skipped" in postgres) return;
    const config = join(folder, "tollgate.yaml");
    writeFileSync(config, `database: ${JSON.stringify(postgres.url)}\n`);
    // The CLI's clock, set an hour back for every Date the process makes.
    const skew = join(folder, "skew.mjs");
    writeFileSync(
      skew,
      `const RealDate = Date;
class SkewedDate extends RealDate {
  constructor(...args) { if (args.length === 0) super(RealDate.now() + ${SKEW_MS}); else super(...args); }
  static now() { return RealDate.now() + ${SKEW_MS}; }
}
globalThis.Date = SkewedDate;
`,
    );
    const env = { NODE_OPTIONS: `--import ${pathToFileURL(skew).href}` };
    const unset = ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"];
    const created = runCli(["accounts", "create", "skewed", "--config", config], { cwd: folder, env, unset });
    expect(created.code, created.stderr).toBe(0);
    const key = runCli(["keys", "create", "--account", "skewed", "--config", config], {
      cwd: folder,
      env,
      unset,
    });
    expect(key.code, key.stderr).toBe(0);

    const client = new Client({ connectionString: postgres.url.replace(/\?.*$/, "") });
    await client.connect();
    try {
      const { rows } = await client.query<{ created_at: string; now: Date }>(
        `select created_at, now() as now from ${postgres.schema}.accounts where name = 'skewed'
         union all
         select keys.created_at, now() from ${postgres.schema}.api_keys as keys
           join ${postgres.schema}.accounts as accounts on accounts.id = keys.account_id
           where accounts.name = 'skewed'`,
      );
      expect(rows).toHaveLength(2);
      for (const row of rows) {
        const offset = Math.abs(Date.parse(row.created_at) - row.now.getTime());
        expect(offset).toBeLessThan(60_000);
      }
    } finally {
      await client.end();
    }
  });
});

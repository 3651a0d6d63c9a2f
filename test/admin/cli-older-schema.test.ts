/**
 * A CLI command on a database an older Tollgate made: it does not migrate it (a server of the
 * older version may still run on it, and would then write rows the new schema's running totals
 * miss), and says what to do in one line; `serve` migrates it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { runCli } from "../support/run-cli.ts";

const _cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-older-schema-"));
const file = join(folder, "t.db");

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function runCliOnFile(args: string[]) {
  return runCli(args, {
    cwd: folder,
    env: { TOLLGATE_DATABASE_URL: `sqlite:${file}` },
    unset: ["TOLLGATE_CONFIG", "TOLLGATE_REDIS_URL"],
  });
}

describe("a CLI command on a database an older Tollgate made", () => {
  it("exits 1 with the way out and leaves the schema as it was", async () => {
    await (await openStore(`sqlite:${file}`)).close();
    const older = new DatabaseSync(file);
    older.exec("drop index api_keys_created_at_public_id_index");
    older.exec("delete from kysely_migration where name = '006_keys_by_creation'");
    older.close();

    const { code, stdout, stderr } = runCliOnFile(["accounts", "list"]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(
      /^tollgate: The database was made by an older version of Tollgate and needs migration 006_keys_by_creation, which only `tollgate serve` applies/,
    );

    const reading = new DatabaseSync(file, { readOnly: true });
    const applied = reading
      .prepare("select name from kysely_migration where name = '006_keys_by_creation'")
      .all();
    reading.close();
    expect(applied).toEqual([]);
  });
});

/**
 * `tollgate serve` on a PostgreSQL store that another process is migrating: it waits as long as
 * the migration takes, says so (who holds the lock) rather than nothing, and a stop signal ends
 * the wait. Regression: it waited in silence, and a SIGTERM was kept for after the start, which
 * never came while a stuck session held the lock.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createPostgresTestSchema, testPostgresUrl } from "../store/postgres-test-database.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-migration-wait-"));
const postgres = await createPostgresTestSchema();
afterAll(async () => {
  if (!("skipped" in postgres)) await postgres.drop();
  rmSync(folder, { recursive: true, force: true });
});

describe.skipIf("skipped" in postgres)("serve while another process holds the migration lock", () => {
  it("logs who holds it, and stops waiting on SIGTERM", async () => {
    if ("skipped" in postgres) return;
    const holder = new Client({ connectionString: testPostgresUrl(), application_name: "stuck-migration" });
    await holder.connect();
    let child: ChildProcess | undefined;
    try {
      const key = createHash("sha256")
        .update(`tollgate.migrate:${postgres.schema}`)
        .digest()
        .readBigInt64BE(0);
      await holder.query("select pg_advisory_lock($1)", [key.toString()]);
      const configFile = join(folder, "tollgate.yaml");
      writeFileSync(
        configFile,
        `server: { host: 127.0.0.1, port: 0 }\ndatabase: "${postgres.url}"\nmodels: []\n`,
      );
      child = spawn(process.execPath, [cli, "serve", "--config", configFile], {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, TOLLGATE_CONFIG: undefined, TOLLGATE_DATABASE_URL: undefined },
      });
      let stdout = "";
      let stderr = "";
      child.stdout?.on("data", (data: Buffer) => {
        stdout += data.toString();
      });
      child.stderr?.on("data", (data: Buffer) => {
        stderr += data.toString();
      });
      const exited = once(child, "exit");
      for (let attempt = 0; attempt < 400 && !stdout.includes("waiting for another process"); attempt++) {
        if (child.exitCode !== null) break;
        await sleep(50);
      }
      const line = JSON.parse(
        stdout.split("\n").find((text) => text.includes("waiting for another process")) ?? "null",
      );
      expect(line).toMatchObject({
        level: 40,
        msg: "waiting for another process to finish migrating the PostgreSQL store (it holds the migration lock)",
        holderApplication: "stuck-migration",
        waitedSeconds: 0,
      });
      child.kill("SIGTERM");
      const [code] = await exited;
      // Stopped as asked (SPEC §11: exit code 0 after SIGTERM unless a shutdown failed).
      expect(code).toBe(0);
      expect(stderr).toMatch(
        /stopped while waiting for another process to finish migrating the store: SIGTERM while starting/,
      );
      expect(stdout).not.toContain("listening on");
    } finally {
      if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await holder.end();
    }
  });
});

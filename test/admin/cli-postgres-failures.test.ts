/**
 * A CLI command whose PostgreSQL store fails under it says what failed, whether anything was
 * changed, whether its output is complete and what to do; no stack, no password, exit 1.
 * Regressions: with the account's row locked, `accounts credit` printed only `tollgate: canceling
 * statement due to statement timeout`; a connection cut during `usage --format csv` printed
 * `tollgate: Connection terminated unexpectedly` after thousands of lines, never saying that
 * the output was cut short.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { runCli } from "../support/run-cli.ts";

const postgres = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the PostgreSQL CLI failure tests: ${postgres.skipped}.`);
const describeWithPostgres = "skipped" in postgres ? describe.skip : describe;

const cli = join(import.meta.dirname, "../../src/cli.ts");
const UNSET = ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"];

let folder: string;
let schema: PostgresTestSchema;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-cli-postgres-failures-"));
  if (!("skipped" in postgres)) schema = postgres;
});

afterAll(async () => {
  rmSync(folder, { recursive: true, force: true });
  if (!("skipped" in postgres)) await postgres.drop();
});

/** A config file naming `url` (the test schema's, through `port` when given), with URL `options`. */
function writeConfig(name: string, options: { port?: number; pgOptions?: string } = {}): string {
  const url = new URL(schema.url);
  if (options.port !== undefined) url.port = String(options.port);
  if (options.pgOptions !== undefined) url.searchParams.set("options", options.pgOptions);
  const file = join(folder, name);
  writeFileSync(file, `database: ${JSON.stringify(url.toString())}\n`);
  return file;
}

/** Runs the CLI without blocking this process (whose proxy or lock the command goes through). */
function runCliAsync(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of UNSET) delete env[variable];
  const child = spawn(process.execPath, [cli, ...args], { cwd: folder, env });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

async function withClient<T>(run: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: schema.url.replace(/\?.*$/, "") });
  client.on("error", () => {});
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => {});
  }
}

describeWithPostgres("a PostgreSQL failure under a CLI command", () => {
  it("says a credit blocked by a locked row was cancelled and changed nothing", async () => {
    const config = writeConfig("plain.yaml");
    const created = runCli(["accounts", "create", "weird", "--balance", "1", "--config", config], {
      cwd: folder,
      unset: UNSET,
    });
    expect(created.code, created.stderr).toBe(0);
    // A lock timeout of half a second stands for the store's statement timeout of 30 s.
    const quick = writeConfig("lock-timeout.yaml", { pgOptions: "-c lock_timeout=500" });
    const result = await withClient(async (client) => {
      await client.query("begin");
      await client.query(`select * from ${schema.schema}.accounts where name = 'weird' for update`);
      try {
        return await runCliAsync(["accounts", "credit", "weird", "5", "--config", quick]);
      } finally {
        await client.query("rollback");
      }
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^tollgate: PostgreSQL at postgres:\/\/postgres@[^ ]+ cancelled `accounts credit` after \d+\.\d s \(canceling statement due to lock timeout\): its statement waited for a row that another session holds locked .*\. Its transaction was rolled back: nothing was changed\. Retry once the other transaction has ended/,
    );
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    const shown = runCli(["accounts", "show", "weird", "--format", "json", "--config", config], {
      cwd: folder,
      unset: UNSET,
    });
    expect(JSON.parse(shown.stdout)).toMatchObject({ balance: "1" });
  });

  it("says an export cut by a lost connection is incomplete, and where it stops", async () => {
    const config = writeConfig("plain.yaml");
    const run = (args: string[]) => runCli([...args, "--config", config], { cwd: folder, unset: UNSET });
    expect(run(["accounts", "create", "exporter"]).code).toBe(0);
    const key = run(["keys", "create", "--account", "exporter"]);
    const publicId = /public id: (\S+)/.exec(key.stdout)?.[1];
    expect(publicId, key.stderr).toBeDefined();
    await withClient((client) =>
      client.query(
        `insert into ${schema.schema}.usage (id, request_id, account_id, key_public_id, model, prompt_tokens,
           completion_tokens, cost_nano, finish_reason, total_ms, estimated, created_at)
         select 'u' || g, 'r' || g, a.id, $1, 'mock', 1, 2, 3, 'stop', 5, 0,
           to_char(timestamp '2026-01-01' + g * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
         from generate_series(1, 30000) g, ${schema.schema}.accounts a where a.name = 'exporter'`,
        [publicId],
      ),
    );
    const proxy = await startCuttingProxy(new URL(schema.url), 1_000_000);
    try {
      const result = await runCliAsync([
        "usage",
        "--format",
        "csv",
        "--config",
        writeConfig("cut.yaml", { port: proxy.port }),
      ]);
      const lines = result.stdout.split("\n").filter((line) => line !== "");
      expect(result.code).toBe(1);
      expect(lines.length).toBeGreaterThan(1);
      expect(lines.length).toBeLessThan(30_001);
      expect(result.stderr).toMatch(
        /^tollgate: The connection to PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\S+ broke while `usage` ran, after \d+\.\d s \(Connection terminated unexpectedly\): .* Nothing was changed: the command only reads\./,
      );
      expect(result.stderr).toContain(
        `The output is incomplete: it stops after its first ${lines.length.toLocaleString("en-US")} lines. Run it again once PostgreSQL answers.`,
      );
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await proxy.close();
    }
  });
});

/** A TCP proxy to `target`'s PostgreSQL that cuts every connection once `limit` bytes came back. */
async function startCuttingProxy(
  target: URL,
  limit: number,
): Promise<{ port: number; close(): Promise<void> }> {
  let received = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (data) => upstream.write(data));
    upstream.on("data", (data) => {
      received += data.length;
      client.write(data);
      if (received > limit) for (const socket of sockets) socket.destroy();
    });
    for (const socket of [client, upstream]) socket.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * `tollgate backup FILE` and `tollgate restore FILE` on real SQLite files beside real
 * `tollgate serve` processes (an upstream model played by a real HTTP mock).
 *
 * The case they exist for: a server killed (kill -9, out of memory) leaves `tollgate.db-wal`
 * holding its last commits. A backup copied over `tollgate.db` with `cp` has SQLite apply that
 * WAL, which belongs to the old contents, onto the backup's at the next open: the ledger is
 * then the old one (or a damaged file), not the backup. The test shows that on a copy of the
 * killed server's files, then that `restore` gives exactly the backup's rows.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { findFreePort } from "../support/free-port.ts";
import { runCli } from "../support/run-cli.ts";
import { killServeProcesses, startServeProcess, writeServeConfig } from "../support/serve-process.ts";
import { until } from "../support/until.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
let folder: string;
let configFile: string;
let database: string;
let port: number;
let upstream: MockUpstream;
const running = new Set<ChildProcess>();

async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const exited = once(child, "exit");
  child.kill(signal);
  await exited;
}

/** `tollgate ARGS --config ...` to its end, without blocking this process (its requests go on). */
async function runCliAsync(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [cli, ...args, "--config", configFile],
      {
        env: { ...process.env, TOLLGATE_CONFIG: undefined, TOLLGATE_DATABASE_URL: undefined },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

function runWithConfig(...args: string[]) {
  return runCli([...args, "--config", configFile], { unset: ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL"] });
}

/** One chat request answered in full; its usage row carries `requestId`. */
async function chat(key: string, requestId: string): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      "x-request-id": requestId,
    },
    body: JSON.stringify({ model: "upstream-chat", messages: [{ role: "user", content: "Hi" }] }),
  });
  expect(response.status).toBe(200);
  await response.json();
}

/** The request ids of a SQLite file's usage rows, read with its WAL when it has one. */
function usageRequestIds(file: string): string[] {
  const db = new DatabaseSync(file);
  try {
    return db
      .prepare("SELECT request_id FROM usage ORDER BY request_id")
      .all()
      .map((row) => String(row.request_id));
  } finally {
    db.close();
  }
}

/** The notes of a SQLite file's credits. */
function creditNotes(file: string): string[] {
  const db = new DatabaseSync(file);
  try {
    return db
      .prepare("SELECT note FROM credits WHERE note IS NOT NULL ORDER BY note")
      .all()
      .map((row) => String(row.note));
  } finally {
    db.close();
  }
}

/** The files of `dir` a restore kept aside. */
function keptAside(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.includes("before-restore"));
}

/** `tollgate ARGS` in `cwd` on the database `url`, without blocking this process. */
async function runOnDatabase(
  cwd: string,
  url: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, ...args], {
      cwd,
      env: { ...process.env, TOLLGATE_CONFIG: undefined, TOLLGATE_DATABASE_URL: url },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/**
 * A process that runs \`tollgate accounts credit ACCOUNT 1 --note w-N\` (the command's own code,
 * on a store opened as the CLI opens it, without a Node start for each) for N = 1, 2, ... until
 * its stdin ends, and prints \`credited w-N\` for each that said "Credited".
 */
function startCreditLoop(url: string, account: string): { child: ChildProcess; credited: () => string[] } {
  const module = (file: string) => pathToFileURL(join(import.meta.dirname, "../../src", file)).href;
  const script = `
    import { openStore } from ${JSON.stringify(module("store/open-store.ts"))};
    import { runAccountsCommand } from ${JSON.stringify(module("admin/accounts-command.ts"))};
    const [url, account] = process.argv.slice(1);
    let stopping = false;
    process.stdin.on("end", () => { stopping = true; });
    process.stdin.resume();
    for (let n = 1; !stopping; n++) {
      // node:sqlite answers at once: without a turn of the event loop, stdin and stdout would wait.
      await new Promise((resolve) => setImmediate(resolve));
      const note = "w-" + String(n).padStart(6, "0");
      try {
        const store = await openStore(url, { upgrade: false });
        try {
          await runAccountsCommand(store, ["credit", account, "1", "--note", note], {
            write: (line) => { if (line.startsWith("Credited")) process.stdout.write("credited " + note + "\\n"); },
          });
        } finally {
          await store.close();
        }
      } catch (error) {
        process.stdout.write("failed " + note + ": " + error.message + "\\n");
      }
    }
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, url, account], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  return {
    child,
    credited: () => [...output.matchAll(/^credited (\S+)$/gm)].map((match) => match[1]!),
  };
}

beforeAll(async () => {
  folder = realpathSync(mkdtempSync(join(tmpdir(), "tollgate-backup-")));
  port = await findFreePort();
  upstream = await startMockUpstream(streamText(["Hello", " there"], { usage: [10, 4] }));
  configFile = writeServeConfig(folder, { port, upstreamBaseUrl: upstream.baseUrl });
  database = join(folder, "tollgate.db");
});

afterAll(async () => {
  for (const child of running) child.kill("SIGKILL");
  killServeProcesses();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe("tollgate backup and restore on SQLite", () => {
  it("answer --help", () => {
    expect(runWithConfig("backup", "--help").stdout).toContain("Usage: tollgate backup FILE");
    expect(runWithConfig("restore", "--help").stdout).toContain("Usage: tollgate restore FILE");
  });

  it("backs up while serving, refuses to restore under a server, and restores exactly the backup after a kill -9", async () => {
    const first = await startServeProcess(configFile, { cwd: folder });
    const key = /starter key: (sk-tg-\S+)/.exec(first.output())?.[1];
    expect(key).toBeDefined();
    const before = Array.from({ length: 10 }, (_, index) => `before-${index}`);
    for (const id of before) await chat(key!, id);

    // Requests in flight while the copy is taken. A few: the server's first checkpoint comes at
    // 1,000 WAL pages (a settle writes a few), so everything it commits stays in its WAL, which
    // the kill -9 below leaves behind.
    const copy = join(folder, "backups", "copy.db");
    mkdirSync(join(folder, "backups"));
    const during = Array.from({ length: 5 }, (_, index) => chat(key!, `during-${index}`));
    const backedUp = await runCliAsync("backup", copy);
    await Promise.all(during);
    expect(backedUp.stderr).toBe("");
    expect(backedUp.code).toBe(0);
    expect(backedUp.stdout).toMatch(
      /^backed up .*tollgate\.db to .*copy\.db \(\d+\.\d KiB\): 1 account, \d+ usage rows/,
    );
    // One self-contained file: nothing of it lives in a WAL beside it.
    expect(existsSync(`${copy}-wal`)).toBe(false);
    const copied = usageRequestIds(copy);
    expect(copied).toEqual(expect.arrayContaining(before));
    const store = await openStore(`sqlite:${copy}`);
    try {
      // Requests in flight at the copy may have left reservations in it (a server started on
      // it releases them); no money figure may disagree.
      expect((await store.audit()).filter((problem) => problem.kind !== "open_reservation")).toEqual([]);
    } finally {
      await store.close();
    }

    // A backup never replaces a file.
    const refused = runWithConfig("backup", copy);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("exists already; a backup never replaces a file");
    expect(usageRequestIds(copy)).toEqual(copied);

    // Not under a serving server: it would go on writing to the file it holds open.
    const underServer = runWithConfig("restore", copy);
    expect(underServer.code).toBe(1);
    expect(underServer.stderr).toContain("A Tollgate server is serving");
    expect(readdirSync(folder).filter((name) => name.includes("before-restore"))).toEqual([]);

    // Answered after the copy, then the server is killed: its last commits are in the WAL.
    const after = Array.from({ length: 10 }, (_, index) => `after-${index}`);
    for (const id of after) await chat(key!, id);
    await stop(first.child, "SIGKILL");
    expect(statSync(`${database}-wal`).size).toBeGreaterThan(0);

    // What `cp copy.db tollgate.db` would do, on a copy of the killed server's files: SQLite
    // applies the old WAL to the backup, and the ledger is the old one again, not the backup.
    const naive = join(folder, "naive");
    mkdirSync(naive);
    copyFileSync(`${database}-wal`, join(naive, "tollgate.db-wal"));
    copyFileSync(copy, join(naive, "tollgate.db"));
    expect(usageRequestIds(join(naive, "tollgate.db"))).toEqual(expect.arrayContaining(after));
    expect(copied).not.toContain("after-0");

    const restored = runWithConfig("restore", copy);
    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    expect(restored.stdout).toContain(
      `restored ${database} from ${copy}: 1 account, ${copied.length} usage rows`,
    );
    expect(usageRequestIds(database)).toEqual(copied);
    // The database it replaced is kept, with the commits its WAL held.
    const kept = /is kept as (\S+): restore that file to undo/.exec(restored.stdout)?.[1];
    expect(kept).toMatch(/tollgate\.db\.before-restore-\d{8}T\d{6}Z$/);
    expect(usageRequestIds(kept!)).toEqual(expect.arrayContaining([...before, ...after]));

    // A server starts on it, releases whatever reservations the copy held, and the books balance.
    const second = await startServeProcess(configFile, { cwd: folder });
    await stop(second.child, "SIGTERM");
    const audit = runWithConfig("audit");
    expect(audit.stdout).toContain("audit passed");
    expect(audit.code).toBe(0);
    expect(usageRequestIds(database)).toEqual(copied);
  });

  it("refuse a PostgreSQL database (pg_dump's work) and an in-memory one, without repeating the URL", () => {
    const postgres = { TOLLGATE_DATABASE_URL: "postgres://tollgate:s3cret-password@127.0.0.1:1/db" };
    // A file to restore from, never read here; and one that does not exist, which a PostgreSQL
    // database is refused before (it said only that the file did not exist).
    const someFile = join(folder, "some-backup.db");
    writeFileSync(someFile, "");
    for (const args of [
      ["backup", join(folder, "pg-copy.db")],
      ["restore", someFile],
      ["restore", join(folder, "no-such-backup.db")],
    ]) {
      const refused = runCli(args, { cwd: folder, env: postgres, unset: ["TOLLGATE_CONFIG"] });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("pg_dump");
      expect(refused.stderr).not.toContain("s3cret-password");
    }
    // pg_dump refuses a URL with Tollgate's ?schema= (invalid URI query parameter): the advice says so.
    const backup = runCli(["backup", join(folder, "pg-copy.db")], {
      cwd: folder,
      env: postgres,
      unset: ["TOLLGATE_CONFIG"],
    });
    expect(backup.stderr).toContain(
      "with ?schema=NAME in the URL, leave that out of it and add --schema=NAME",
    );
    const memory = { TOLLGATE_DATABASE_URL: "sqlite::memory:" };
    const refused = runCli(["backup", join(folder, "memory-copy.db")], {
      cwd: folder,
      env: memory,
      unset: ["TOLLGATE_CONFIG"],
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("no file to back up");
    expect(existsSync(join(folder, "memory-copy.db"))).toBe(false);
  });

  it("refuses a folder, a named pipe and a device as the backup, before opening them (regression: a pipe hung)", () => {
    const env = { TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "kinds.db")}` };
    const pipe = join(folder, "backup-pipe");
    expect(spawnSync("mkfifo", [pipe]).status).toBe(0);
    const backupsFolder = join(folder, "backups-folder");
    mkdirSync(backupsFolder, { recursive: true });
    for (const [file, says] of [
      [backupsFolder, "is a folder: give the backup file itself"],
      [pipe, "is not a regular file (a named pipe, a device or a socket)"],
      ["/dev/null", "is not a regular file"],
    ] as const) {
      const refused = runCli(["restore", file], { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${file} ${says}`);
    }
  });

  it("says that charges owed in the journal beside the database are not in the copy", () => {
    const owing = { TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "owing.db")}` };
    const journal = join(folder, "owing.db.pending-charges.jsonl");
    writeFileSync(journal, '{"paid":"nothing-owed-but-a-line"}\n');
    const backedUp = runCli(["backup", join(folder, "owing-copy.db")], {
      cwd: folder,
      env: owing,
      unset: ["TOLLGATE_CONFIG"],
    });
    expect(backedUp.code).toBe(0);
    expect(backedUp.stdout).toContain(`${journal} holds charges the store has not taken yet`);
    rmSync(journal);
  });

  it("keeps the database a restore replaces under the next free name where one of that second is kept (regression: a bare EEXIST)", () => {
    const database = join(folder, "undo.db");
    const env = { TOLLGATE_DATABASE_URL: `sqlite:${database}` };
    const options = { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] };
    expect(runCli(["accounts", "create", "undo"], options).code).toBe(0);
    const copy = join(folder, "undo-copy.db");
    expect(runCli(["backup", copy], options).code).toBe(0);
    // As a restore undone at once, within its second, finds: this second's name (and the next
    // ones', should the clock turn meanwhile) taken.
    const stamp = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/[-:]|\.\d{3}/g, "");
    for (const ms of [0, 1000, 2000]) writeFileSync(`${database}.before-restore-${stamp(ms)}`, "");
    const restored = runCli(["restore", copy], options);
    expect(restored.stderr).not.toContain("EEXIST");
    expect(restored.code).toBe(0);
    expect(restored.stdout).toMatch(
      /is kept as \S+undo\.db\.before-restore-\d{8}T\d{6}Z-2: restore that file to undo/,
    );
  });

  it("creates a database (and a backup folder) that does not exist yet before copying it, and restores over a file SQLite cannot read", () => {
    // As every command that uses the store (SPEC §11), and saying so.
    const fresh = { TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "fresh.db")}` };
    // In a folder that does not exist yet, as the README's `backup backups/...` in a fresh checkout.
    const emptyCopy = join(folder, "backups", "fresh-copy.db");
    const backedUp = runCli(["backup", emptyCopy], { cwd: folder, env: fresh, unset: ["TOLLGATE_CONFIG"] });
    expect(backedUp.code).toBe(0);
    expect(backedUp.stdout).toContain("0 accounts, 0 usage rows, 0 open reservations");
    // On stderr, as every command says it (regression: stdout, where a cron job's errors are not).
    expect(backedUp.stderr).toContain(`tollgate: there was no database at ${join(folder, "fresh.db")}`);
    expect(backedUp.stdout).not.toContain("no database");

    // What a file copied over a database with a stale WAL may leave: no database at all.
    const damaged = join(folder, "damaged.db");
    writeFileSync(damaged, "not a database ".repeat(1000));
    writeFileSync(`${damaged}-wal`, "stale");
    const env = { TOLLGATE_DATABASE_URL: `sqlite:${damaged}` };
    const restored = runCli(["restore", emptyCopy], { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] });
    // Only the word that the variable replaces the folder's config's database.
    expect(restored.stderr).toBe(
      `tollgate: TOLLGATE_DATABASE_URL replaces database in ${join(folder, "tollgate.yaml")} (the environment wins): acting on sqlite:${damaged}, not on the config's database. Unset TOLLGATE_DATABASE_URL to use the config's.\n`,
    );
    expect(restored.code).toBe(0);
    const movedTo = /could not be read; its files were moved to (\S+) as they were/.exec(
      restored.stdout,
    )?.[1];
    expect(movedTo).toBeDefined();
    expect(existsSync(`${movedTo}-wal`)).toBe(true);
    expect(usageRequestIds(damaged)).toEqual([]);
    expect(runCli(["audit"], { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] }).stdout).toContain(
      "audit passed: 0 accounts",
    );
  });
  // Regression: the file kept its old size, nearly all free pages, and so did every backup after.
  it("gives back the pages a large database left free when a small backup replaces it", () => {
    const large = join(folder, "large.db");
    const env = { TOLLGATE_DATABASE_URL: `sqlite:${large}` };
    const small = join(folder, "small-copy.db");
    expect(runCli(["backup", small], { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] }).code).toBe(0);
    // Then the database grows: 40,000 usage rows of a made-up account, some megabytes.
    const db = new DatabaseSync(large);
    db.exec("PRAGMA foreign_keys = OFF");
    const columns = db
      .prepare("SELECT name FROM pragma_table_info('usage')")
      .all()
      .map((row) => String(row.name));
    const insert = db.prepare(
      `INSERT INTO usage (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
    );
    db.exec("BEGIN");
    for (let row = 0; row < 40_000; row++)
      insert.run(...columns.map((name) => (name === "id" || name === "request_id" ? `row-${row}` : 1)));
    db.exec("COMMIT");
    db.close();
    const grown = statSync(large).size;
    expect(grown).toBeGreaterThan(2_000_000);

    const restored = runCli(["restore", small], { cwd: folder, env, unset: ["TOLLGATE_CONFIG"] });
    expect(restored.code).toBe(0);
    expect(usageRequestIds(large)).toEqual([]);
    const check = new DatabaseSync(large, { readOnly: true });
    const freePages = Number(check.prepare("PRAGMA freelist_count").get()?.freelist_count);
    check.close();
    expect(freePages).toBe(0);
    expect(statSync(large).size).toBeLessThan(grown / 10);
  });

  it("loses no credit a command made while it restored: each is in the database it replaced or the restored one", async () => {
    const dir = join(folder, "concurrent");
    mkdirSync(dir);
    const url = `sqlite:${join(dir, "tollgate.db")}`;
    expect((await runOnDatabase(dir, url, "accounts", "create", "load")).code).toBe(0);
    // Large enough that copying it aside and replacing it take a while (about 70 MB).
    const db = new DatabaseSync(join(dir, "tollgate.db"));
    const account = String(db.prepare("SELECT id FROM accounts WHERE name = 'load'").get()?.id);
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
       INSERT INTO usage (id, request_id, account_id, key_public_id, model, prompt_tokens,
         completion_tokens, cost_nano, total_ms, estimated, created_at)
       SELECT 'u-' || i, 'r-' || i, ?, 'k', 'upstream-chat', 10, 4, 0, 1, 0, '2025-06-01T12:00:00.000Z' FROM n`,
    ).run(account);
    db.close();
    const backupFile = join(dir, "backup.db");
    expect((await runOnDatabase(dir, url, "backup", backupFile)).code).toBe(0);

    const loop = startCreditLoop(url, "load");
    await until(() => loop.credited().length >= 3, "the first credits");
    const restored = await runOnDatabase(dir, url, "restore", backupFile);
    const creditedByRestoreEnd = loop.credited().length;
    // Credits after the restore too: the loop goes on over the restored database.
    await until(() => loop.credited().length >= creditedByRestoreEnd + 3, "credits after the restore");
    const exited = once(loop.child, "exit");
    loop.child.stdin?.end();
    await exited;

    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    const kept = /is kept as (\S+): restore that file to undo/.exec(restored.stdout)?.[1];
    expect(kept).toBeDefined();
    const found = new Set([...creditNotes(join(dir, "tollgate.db")), ...creditNotes(kept!)]);
    expect(loop.credited().filter((note) => !found.has(note))).toEqual([]);
    expect(usageRequestIds(join(dir, "tollgate.db"))).toHaveLength(200000);
  });

  it("refuses while another process holds the write lock, and changes nothing", async () => {
    const dir = join(folder, "locked");
    mkdirSync(dir);
    const file = join(dir, "tollgate.db");
    const url = `sqlite:${file}`;
    expect((await runOnDatabase(dir, url, "accounts", "create", "held")).code).toBe(0);
    const backupFile = join(dir, "backup.db");
    expect((await runOnDatabase(dir, url, "backup", backupFile)).code).toBe(0);
    expect((await runOnDatabase(dir, url, "accounts", "credit", "held", "1", "--note", "after")).code).toBe(
      0,
    );

    // What an open sqlite3 session that began a write does.
    const session = new DatabaseSync(file);
    session.exec("BEGIN IMMEDIATE");
    let refused: Awaited<ReturnType<typeof runOnDatabase>>;
    try {
      refused = await runOnDatabase(dir, url, "restore", backupFile);
    } finally {
      session.exec("ROLLBACK");
      session.close();
    }
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `Another process is writing to the database ${file} (an open sqlite3 session, a tollgate command): stop it, then restore. Nothing was changed.`,
    );
    expect(keptAside(dir)).toEqual([]);
    expect(creditNotes(file)).toEqual(["after"]);
  });

  it("names the charge journal where the server keeps it: beside the configured name, a link", async () => {
    const dir = join(folder, "linked");
    mkdirSync(join(dir, "real"), { recursive: true });
    const realUrl = `sqlite:${join(dir, "real", "real.db")}`;
    expect((await runOnDatabase(dir, realUrl, "accounts", "create", "linked")).code).toBe(0);
    const backupFile = join(dir, "backup.db");
    expect((await runOnDatabase(dir, realUrl, "backup", backupFile)).code).toBe(0);
    symlinkSync(join("real", "real.db"), join(dir, "link.db"));
    const journal = join(dir, "link.db.pending-charges.jsonl");
    writeFileSync(journal, "");

    const restored = await runOnDatabase(dir, "sqlite:./link.db", "restore", backupFile);
    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    expect(restored.stdout).toContain(
      `${journal} holds charges the previous server owed and was left in place`,
    );
  });
});

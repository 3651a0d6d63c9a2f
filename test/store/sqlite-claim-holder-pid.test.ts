/**
 * "Another Tollgate server serves ..." (a second `serve`) and "A Tollgate server is serving ..."
 * (`restore` under a server) name the process that holds the claim, read from the system's table
 * of locks (the lock itself records no process), so the operator knows which one to stop.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CliError } from "../../src/admin/cli-error.ts";
import { runRestoreCommand } from "../../src/admin/restore-command.ts";
import { openStore } from "../../src/store/open-store.ts";
import { findLockHolder } from "../../src/store/sqlite/find-lock-holder.ts";
import { collectOutput } from "../admin/cli-output.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();
const claimModule = new URL("../../src/store/sqlite/claim-sqlite-file.ts", import.meta.url).href;
/** Where the kernel lists the locks this test reads; elsewhere the holder is not known. */
const locksListed = existsSync("/proc/locks");

let others: ChildProcess[] = [];
afterEach(async () => {
  for (const other of others) {
    if (other.exitCode === null && other.signalCode === null) {
      other.kill("SIGKILL");
      await once(other, "exit");
    }
  }
  others = [];
});

/**
 * Another server's process, holding the claim on `file` until it is killed; with `restore`, one
 * whose arguments say `restore`, as `tollgate restore FILE`'s do while it holds the claim.
 */
async function startOtherServer(file: string, as: "serve" | "restore" = "serve"): Promise<ChildProcess> {
  const script = `const { claimSqliteFile } = await import(${JSON.stringify(claimModule)});
    claimSqliteFile(${JSON.stringify(file)});
    process.stdout.write("claimed");
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, as], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  others.push(child);
  const [data] = (await once(child.stdout!, "data")) as [Buffer];
  expect(data.toString()).toBe("claimed");
  return child;
}

/** A database, a backup to restore into it and a config naming it. */
async function prepareRestore() {
  const url = newDatabaseUrl(directory);
  const file = url.slice("sqlite:".length);
  await (await openStore(url)).close();
  const backup = join(directory, `backup-${Date.now()}.db`);
  await (await openStore(`sqlite:${backup}`)).close();
  const config = join(directory, `restore-${Date.now()}.yaml`);
  writeFileSync(config, `database: ${url}\nmodels: []\n`);
  return { url, file, backup, config };
}

describe.skipIf(!locksListed)("a refused claim on a SQLite file", () => {
  it("names the process of the server that holds it", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const other = await startOtherServer(file);
    expect(findLockHolder(`${file}.server.lock`)).toBe(other.pid);
    await expect(openStore(url, { owner: true })).rejects.toThrow(
      `Another Tollgate server serves ${file} (process ${other.pid} holds ${file}.server.lock).`,
    );
  });

  it("names it in restore's refusal too", async () => {
    const { file, backup, config } = await prepareRestore();
    const other = await startOtherServer(file);
    const error = await runRestoreCommand([backup], config, collectOutput()).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toContain(`(process ${other.pid} holds ${file}.server.lock): stop it`);
  });

  // Regression: both were told that a server held the file.
  it("says that a restore holds it, to a server that starts and to a second restore", async () => {
    const { url, file, backup, config } = await prepareRestore();
    const restoring = await startOtherServer(file, "restore");
    await expect(openStore(url, { owner: true })).rejects.toThrow(
      `A tollgate restore (process ${restoring.pid}) is restoring ${file} (it holds ${file}.server.lock): wait for it to finish, then start again.`,
    );
    const error = await runRestoreCommand([backup], config, collectOutput()).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toBe(
      `Another tollgate restore (process ${restoring.pid}) is restoring ${file}: wait for it to finish. Nothing was changed.`,
    );
  });

  it("knows no holder of a file nobody locks", () => {
    const file = join(directory, "unlocked");
    writeFileSync(file, "");
    expect(findLockHolder(file)).toBeUndefined();
    expect(findLockHolder(join(directory, "missing"))).toBeUndefined();
  });
});

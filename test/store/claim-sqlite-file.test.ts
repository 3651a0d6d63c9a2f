import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, linkSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { openStore } from "../../src/store/open-store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();
const claimModule = new URL("../../src/store/sqlite/claim-sqlite-file.ts", import.meta.url).href;

/** A process that stays alive until it is killed: a stand-in for another program. */
async function startOtherProcess(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  await once(child, "spawn");
  return child;
}

/**
 * Another server's claim: a process (in a PID namespace of its own with `namespace`, as a
 * container is) that claims `file` and holds it until it is killed. Resolves once it has.
 */
async function startOtherServer(file: string, options: { namespace?: boolean } = {}): Promise<ChildProcess> {
  const script = `const { claimSqliteFile } = await import(${JSON.stringify(claimModule)});
    claimSqliteFile(${JSON.stringify(file)});
    process.stdout.write("claimed");
    setInterval(() => {}, 1000);`;
  const command = [process.execPath, "--input-type=module", "-e", script];
  const child = options.namespace
    ? spawn("unshare", ["--pid", "--fork", "--kill-child", ...command], {
        stdio: ["ignore", "pipe", "inherit"],
      })
    : spawn(command[0]!, command.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
  const [data] = (await once(child.stdout!, "data")) as [Buffer];
  expect(data.toString()).toBe("claimed");
  return child;
}

/** Whether `unshare --pid` works here (it needs privileges a CI container may not have). */
const pidNamespaces = spawnSync("unshare", ["--pid", "--fork", "true"]).status === 0;

describe("the server's claim on its SQLite file", () => {
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

  it("is a lock file beside the database while the server's store is open, gone when it closes", async () => {
    const url = newDatabaseUrl(directory);
    const lock = `${url.slice("sqlite:".length)}.server.lock`;
    const store = await openStore(url, { owner: true });
    expect(existsSync(lock)).toBe(true);
    // The CLI (a plain store) claims nothing, and the server's own process may open it again.
    const cli = await openStore(url);
    const again = await openStore(url, { owner: true });
    await cli.close();
    await again.close();
    expect(existsSync(lock)).toBe(true);
    await store.close();
    expect(existsSync(lock)).toBe(false);
    // Released: another server may have it now.
    const next = await openStore(url, { owner: true });
    await next.close();
  });

  it("stops a second server while another process serves the file, and lets the CLI in", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    others.push(await startOtherServer(file));
    await expect(openStore(url, { owner: true })).rejects.toThrow(
      /Another Tollgate server serves .*PostgreSQL/,
    );
    const cli = await openStore(url);
    expect(await cli.hasAccounts()).toBe(false);
    await cli.close();
  });

  it("stops a second server that names the file through a link", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    await (await openStore(url)).close();
    const link = `${file}.link`;
    symlinkSync(file, link);
    // The other server opens the file by its link, as a second config naming it so would.
    const storeModule = new URL("../../src/store/open-store.ts", import.meta.url).href;
    const script = `const { openStore } = await import(${JSON.stringify(storeModule)});
      await openStore(${JSON.stringify(`sqlite:${link}`)}, { owner: true });
      process.stdout.write("claimed");
      setInterval(() => {}, 1000);`;
    const other = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    others.push(other);
    const [data] = (await once(other.stdout!, "data")) as [Buffer];
    expect(data.toString()).toBe("claimed");
    await expect(openStore(url, { owner: true })).rejects.toThrow(/Another Tollgate server serves/);
  });

  // Regression: a second server opened by a hard link started (its log and lock by its own
  // name), and the charges it took were lost when it stopped.
  it("refuses a file with a second name (a hard link), by either name, for a server and for the CLI", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const store = await openStore(url);
    await createAccount(store, { name: "kept", balanceNano: 5n });
    await store.close();
    const other = `${file}.other`;
    linkSync(file, other);
    const refusal = `The database ${file} has 2 names (hard links to one file)`;
    for (const named of [url, `sqlite:${other}`]) {
      for (const owner of [true, false]) {
        const opening = openStore(named, { owner });
        await expect(opening).rejects.toThrow(named === url ? refusal : `The database ${other} has 2 names`);
      }
    }
    expect(existsSync(`${file}.server.lock`)).toBe(false);
    // One name again: served as before, nothing lost.
    unlinkSync(other);
    const again = await openStore(url, { owner: true });
    expect((await again.listAccounts()).map((account) => account.name)).toEqual(["kept"]);
    await again.close();
  });

  it.skipIf(!pidNamespaces)(
    "stops a second server in another PID namespace, where both run as process 1 (two containers on one volume)",
    async () => {
      const file = newDatabaseUrl(directory).slice("sqlite:".length);
      others.push(await startOtherServer(file, { namespace: true }));
      const second = spawnSync(
        "unshare",
        [
          "--pid",
          "--fork",
          process.execPath,
          "--input-type=module",
          "-e",
          `const { claimSqliteFile } = await import(${JSON.stringify(claimModule)});
          try { claimSqliteFile(${JSON.stringify(file)}); process.stdout.write("claimed"); }
          catch (error) { process.stdout.write(error.message); }`,
        ],
        { encoding: "utf8" },
      );
      expect(second.stdout).toMatch(/^Another Tollgate server serves/);
    },
  );

  it("is free again once the process that held it is gone (a crash), and ignores unrelated processes", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const crashed = await startOtherServer(file);
    crashed.kill("SIGKILL");
    await once(crashed, "exit");
    // A claim file of an older version naming a live process that is no server: no claim either.
    const unrelated = await startOtherProcess();
    others.push(unrelated);
    writeFileSync(`${file}.server`, `${process.pid}\n`);
    const store = await openStore(url, { owner: true });
    await store.close();
    expect(existsSync(`${file}.server`)).toBe(false);
  });

  it("stops a second server while a server of an older version (a claim naming a live process) serves", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const old = await startOtherProcess();
    others.push(old);
    writeFileSync(`${file}.server`, `${old.pid}\n`);
    await expect(openStore(url, { owner: true })).rejects.toThrow(
      new RegExp(`Another Tollgate server \\(process ${old.pid}\\) serves`),
    );
  });

  // Regression (upgrade explorer): an older version's claim whose process id another program
  // took since (a crash, then a reboot) kept the server from starting, with advice that did not
  // apply (the process was there).
  it("drops an older version's claim whose process runs another program than Node.js", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
    others.push(sleeper);
    writeFileSync(`${file}.server`, `${sleeper.pid}\n`);
    const store = await openStore(url, { owner: true });
    await store.close();
    expect(existsSync(`${file}.server`)).toBe(false);
    expect(sleeper.exitCode).toBe(null);
  });

  it("goes to exactly one of several processes that claim the file at the same moment", async () => {
    const file = newDatabaseUrl(directory).slice("sqlite:".length);
    // Each waits for the same moment, claims, and holds the claim (alive) until every one has tried.
    const start = Date.now() + 700;
    const script = `const { claimSqliteFile } = await import(${JSON.stringify(claimModule)});
      while (Date.now() < ${start}) {}
      let result = "claimed";
      try { claimSqliteFile(${JSON.stringify(file)}); } catch { result = "refused"; }
      process.stdout.write(result);
      setInterval(() => {}, 1000);`;
    const contenders = Array.from({ length: 6 }, () =>
      spawn(process.execPath, ["--input-type=module", "-e", script], {
        stdio: ["ignore", "pipe", "inherit"],
      }),
    );
    others.push(...contenders);
    const results = await Promise.all(
      contenders.map(async (child) => {
        const [data] = (await once(child.stdout!, "data")) as [Buffer];
        return data.toString();
      }),
    );
    expect(results.filter((result) => result === "claimed")).toHaveLength(1);
    expect(results.filter((result) => result === "refused")).toHaveLength(5);
  });
});

import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** A process that stays alive until it is killed: a stand-in for another server. */
async function startOtherProcess(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  await once(child, "spawn");
  return child;
}

describe("the server's claim on its SQLite file", () => {
  let other: ChildProcess | undefined;
  afterEach(async () => {
    if (other !== undefined && other.exitCode === null && other.signalCode === null) {
      other.kill("SIGKILL");
      await once(other, "exit");
    }
    other = undefined;
  });

  it("is written beside the file while the server's store is open, and removed when it closes", async () => {
    const url = newDatabaseUrl(directory);
    const claim = `${url.slice("sqlite:".length)}.server`;
    const store = await openStore(url, { owner: true });
    expect(readFileSync(claim, "utf8").trim()).toBe(String(process.pid));
    // The CLI (a plain store) claims nothing, and the server's own process may open it again.
    const cli = await openStore(url);
    const again = await openStore(url, { owner: true });
    await cli.close();
    await again.close();
    expect(existsSync(claim)).toBe(true);
    await store.close();
    expect(existsSync(claim)).toBe(false);
  });

  it("stops a second server while a live process holds the file, and lets the CLI in", async () => {
    const url = newDatabaseUrl(directory);
    const claim = `${url.slice("sqlite:".length)}.server`;
    other = await startOtherProcess();
    writeFileSync(claim, `${other.pid}\n`);
    await expect(openStore(url, { owner: true })).rejects.toThrow(
      new RegExp(`Another Tollgate server \\(process ${other.pid}\\) serves .*PostgreSQL`),
    );
    const cli = await openStore(url);
    expect(await cli.hasAccounts()).toBe(false);
    await cli.close();
    expect(readFileSync(claim, "utf8").trim()).toBe(String(other.pid));
  });

  it("takes over a claim whose process is gone (a crash)", async () => {
    const url = newDatabaseUrl(directory);
    const claim = `${url.slice("sqlite:".length)}.server`;
    other = await startOtherProcess();
    writeFileSync(claim, `${other.pid}\n`);
    other.kill("SIGKILL");
    await once(other, "exit");
    const store = await openStore(url, { owner: true });
    expect(readFileSync(claim, "utf8").trim()).toBe(String(process.pid));
    await store.close();
    expect(existsSync(claim)).toBe(false);
  });

  it("goes to exactly one of several processes that claim the file at the same moment", async () => {
    const claimModule = new URL("../../src/store/sqlite/claim-sqlite-file.ts", import.meta.url).href;
    for (const stale of [false, true]) {
      const file = newDatabaseUrl(directory).slice("sqlite:".length);
      if (stale) {
        // The claim of a server that crashed: every contender sees it is gone at once.
        other = await startOtherProcess();
        writeFileSync(`${file}.server`, `${other.pid}\n`);
        other.kill("SIGKILL");
        await once(other, "exit");
      }
      // Each waits for the same moment, claims, and holds the claim (alive) until every one has
      // tried: a contender slow to start must still find the winner running, not a claim left
      // by a process that has exited (which it would rightly take over).
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
      const results = await Promise.all(
        contenders.map(async (child) => {
          const [data] = (await once(child.stdout!, "data")) as [Buffer];
          return data.toString();
        }),
      );
      await Promise.all(
        contenders.map(async (child) => {
          child.kill("SIGKILL");
          await once(child, "exit");
        }),
      );
      expect(
        results.filter((result) => result === "claimed"),
        `with a stale claim: ${stale}`,
      ).toHaveLength(1);
      expect(results.filter((result) => result === "refused")).toHaveLength(5);
    }
  });
});

import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { readdir, readFile, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { acquireDownloadLock } from "../../src/models/download/acquire-download-lock.ts";

const root = mkdtempSync(join(tmpdir(), "tollgate-lock-"));

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** The id of a process of this machine that has ended (as a `models pull` stopped with Ctrl-C). */
async function endedProcessId(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  const [code] = await once(child, "exit");
  expect(code).toBe(0);
  if (child.pid === undefined) throw new Error("the child had no pid");
  return child.pid;
}

/** Whether the lock file names this process as its holder (`hostname pid start token`). */
async function isHeldByThisProcess(path: string): Promise<boolean> {
  return (await readFile(path, "utf8")).startsWith(`${hostname()} ${process.pid} `);
}

/**
 * Acquires the lock, or gives up as soon as it would wait (its `onWait` aborts), so a lock that
 * is (wrongly) waited for ends the attempt instead of holding the test for 30 s.
 */
async function acquireWithoutWaiting(path: string) {
  const controller = new AbortController();
  const lock = await acquireDownloadLock({
    path,
    signal: controller.signal,
    onWait: () => controller.abort(),
  }).catch(() => undefined);
  return { lock, waited: controller.signal.aborted };
}

describe("a download lock left by a process of this machine", () => {
  it("is taken over at once when that process has ended (no 30 s wait after Ctrl-C or kill)", async () => {
    const path = join(root, "ended.lock");
    await writeFile(path, `${hostname()} ${await endedProcessId()}\n`);

    const { lock, waited } = await acquireWithoutWaiting(path);

    expect(waited).toBe(false);
    expect(await isHeldByThisProcess(path)).toBe(true);
    await lock?.release();
    expect(existsSync(path)).toBe(false);
    // Nothing of the old lock is left beside it.
    expect((await readdir(root)).filter((name) => name.startsWith("ended.lock"))).toEqual([]);
  });

  it("goes to one of two waiters that find it at once; the other waits", async () => {
    const path = join(root, "contended.lock");
    await writeFile(path, `${hostname()} ${await endedProcessId()}\n`);

    const attempts = await Promise.all([acquireWithoutWaiting(path), acquireWithoutWaiting(path)]);

    expect(attempts.filter((attempt) => attempt.lock !== undefined)).toHaveLength(1);
    expect(attempts.filter((attempt) => attempt.waited)).toHaveLength(1);
    expect(await isHeldByThisProcess(path)).toBe(true);
    await Promise.all(attempts.map((attempt) => attempt.lock?.release()));
  });

  it("is waited for while that process runs", async () => {
    const path = join(root, "running.lock");
    const holder = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    try {
      await once(holder, "spawn");
      await writeFile(path, `${hostname()} ${holder.pid}\n`);
      expect(await acquireWithoutWaiting(path)).toEqual({ lock: undefined, waited: true });
      expect(await readFile(path, "utf8")).toBe(`${hostname()} ${holder.pid}\n`);
    } finally {
      holder.kill("SIGKILL");
    }
  });

  it("is waited for when it names another machine: its process cannot be looked up from here", async () => {
    const path = join(root, "elsewhere.lock");
    await writeFile(path, `not-${hostname()} ${await endedProcessId()}\n`);
    expect(await acquireWithoutWaiting(path)).toEqual({ lock: undefined, waited: true });
  });

  it("is waited for while that process runs, however long it has not touched the lock (a pull paused with Ctrl-Z)", async () => {
    const path = join(root, "paused.lock");
    const module = pathToFileURL(
      join(import.meta.dirname, "../../src/models/download/acquire-download-lock.ts"),
    );
    const holder = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { acquireDownloadLock } from ${JSON.stringify(module.href)};
         await acquireDownloadLock({ path: ${JSON.stringify(path)} });
         process.stdout.write("held\\n");
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const [data] = (await once(holder.stdout, "data")) as [Buffer];
      expect(data.toString()).toBe("held\n");
      holder.kill("SIGSTOP");
      const held = await readFile(path, "utf8");
      // Paused for ten minutes: no heartbeat touched the lock meanwhile.
      const past = new Date(Date.now() - 600_000);
      await utimes(path, past, past);

      expect(await acquireWithoutWaiting(path)).toEqual({ lock: undefined, waited: true });
      expect(await readFile(path, "utf8")).toBe(held);
    } finally {
      holder.kill("SIGKILL");
    }
  });

  it.skipIf(!existsSync("/proc/self/stat"))(
    "is taken over at once when it names this process's id with another start (a restarted container's process got the id again)",
    async () => {
      const path = join(root, "earlier-run.lock");
      await writeFile(path, `${hostname()} ${process.pid} 00000000-0000-0000-0000-000000000000/1 earlier\n`);

      const { lock, waited } = await acquireWithoutWaiting(path);

      expect(waited).toBe(false);
      expect(await isHeldByThisProcess(path)).toBe(true);
      await lock?.release();
    },
  );
});

describe("a held download lock", () => {
  it("that another process took over is no longer held, and releasing it leaves the new holder's lock", async () => {
    const path = join(root, "taken-over.lock");
    const lock = await acquireDownloadLock({ path });
    expect(await lock.isHeld()).toBe(true);
    // A waiter on another machine judged it abandoned (this process was paused) and took it.
    const other = `not-${hostname()} 4242 - other\n`;
    await writeFile(path, other);

    expect(await lock.isHeld()).toBe(false);
    await lock.release();
    expect(await readFile(path, "utf8")).toBe(other);
    expect((await readdir(root)).filter((name) => name.startsWith("taken-over.lock."))).toEqual([]);
  });
});

/** Whether this machine lets a test start a process in a PID namespace of its own (root, Linux). */
const unshareProbe = spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"], { stdio: "ignore" });
const canUnshare = unshareProbe.status === 0;
if (!canUnshare) {
  console.warn(
    `Skipping the download lock test across PID namespaces: unshare --pid is not available here (${unshareProbe.error?.message ?? `exit ${unshareProbe.status}`}).`,
  );
}

describe.skipIf(!canUnshare)(
  "a download lock held by a process in another PID namespace of this host",
  () => {
    it("is waited for while it is held, though a process of the same id runs here (containers sharing a hostname)", async () => {
      const path = join(root, "namespace.lock");
      const moduleUrl = pathToFileURL(
        join(import.meta.dirname, "../../src/models/download/acquire-download-lock.ts"),
      ).href;
      // The holder is process 1 of its namespace; here, process 1 is another one, started at another time.
      const holder = spawn(
        "unshare",
        [
          "--pid",
          "--fork",
          "--mount-proc",
          process.execPath,
          "--input-type=module",
          "-e",
          `const [url, path] = process.argv.slice(-2);
const { acquireDownloadLock } = await import(url);
const lock = await acquireDownloadLock({ path });
console.log("held");
process.stdin.resume();
process.stdin.on("end", async () => {
  console.log((await lock.isHeld()) ? "released while held" : "lost");
  await lock.release();
});`,
          moduleUrl,
          path,
        ],
        { stdio: ["pipe", "pipe", "inherit"] },
      );
      let output = "";
      holder.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      const exited = once(holder, "exit");
      await expect.poll(() => output, { timeout: 20_000 }).toContain("held");

      const waiting = Promise.withResolvers<"waiting">();
      const acquiring = acquireDownloadLock({
        path,
        pollMilliseconds: 20,
        onWait: () => waiting.resolve("waiting"),
      });
      expect(await Promise.race([waiting.promise, acquiring.then(() => "taken over" as const)])).toBe(
        "waiting",
      );

      holder.stdin.end();
      const lock = await acquiring;
      await exited;
      expect(output).toContain("released while held");
      expect(await isHeldByThisProcess(path)).toBe(true);
      await lock.release();
    });
  },
);

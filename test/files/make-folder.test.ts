/**
 * makeFolder and makeFolderSync (make-folder.ts): folders made as `mkdir -p` makes them, and an
 * error, not an endless loop, where a folder takes none in it. Node's recursive mkdir looped for
 * ever under /dev/fd, at full CPU and deaf to SIGTERM: a config read from a pipe put a relative
 * database there. The commands run in a child process with a time limit, so that a loop fails the
 * test rather than hanging the run.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeFolder, makeFolderSync } from "../../src/files/make-folder.ts";

const cli = join(import.meta.dirname, "../../bin/tollgate.js");
const folder = mkdtempSync(join(tmpdir(), "tollgate-make-folder-"));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** Runs the CLI with `args`, killed after 30 s. */
function runCli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [cli, ...args], {
    cwd: folder,
    env: { ...process.env, TOLLGATE_CONFIG: "", ...env },
    encoding: "utf8",
    timeout: 30_000,
    killSignal: "SIGKILL",
  });
}

describe("making folders", () => {
  it("makes the missing folders above, and takes a folder that exists", async () => {
    makeFolderSync(join(folder, "a", "b", "c"));
    expect(statSync(join(folder, "a", "b", "c")).isDirectory()).toBe(true);
    makeFolderSync(join(folder, "a", "b"));
    await makeFolder(join(folder, "x", "y"));
    expect(statSync(join(folder, "x", "y")).isDirectory()).toBe(true);
    await makeFolder(join(folder, "x"));
  });

  it("throws where a file is in the way", async () => {
    writeFileSync(join(folder, "file"), "");
    expect(() => makeFolderSync(join(folder, "file"))).toThrow(/EEXIST/);
    expect(() => makeFolderSync(join(folder, "file", "below"))).toThrow(/ENOTDIR/);
    await expect(makeFolder(join(folder, "file", "below"))).rejects.toThrow(/ENOTDIR/);
  });

  it("fails, and does not loop, where a folder takes no folders: a test model under /dev/fd (regression)", () => {
    const run = runCli(["models", "make-test", "/dev/fd/models/tiny.gguf"]);
    expect(run.signal).toBeNull();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("cannot write /dev/fd/models/tiny.gguf (ENOENT)");
  });

  it("explains a database under /proc/self/fd (regression: looped for ever)", () => {
    const run = runCli(["accounts", "list"], {
      TOLLGATE_DATABASE_URL: "sqlite:/proc/self/fd/data/tollgate.db",
    });
    expect(run.signal).toBeNull();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      "Cannot create the database folder /proc/self/fd/data: /proc/self/fd takes no folders in it",
    );
    expect(existsSync(join(folder, "data"))).toBe(false);
  });
});

/**
 * loadConfig on paths that are not regular files, with real ones: a named pipe (mkfifo), whose
 * open waits for a writer that may never come, and a device are refused before they are opened;
 * a pipe a process holds open (`--config <(command)`, reached as /dev/fd/N or /proc/PID/fd/N) is
 * read to its end, and a read that does not end within the time limit fails the load instead of
 * blocking it (and, in a server, every reload after it) for ever.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LoadConfigOptions } from "../../src/catalog/load-config.ts";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

const CONFIG = `server: { port: 9000 }
models:
  - id: local
    pricing: { input_per_million: "0.10", output_per_million: "0.40" }
    engine: { type: llama, model: /models/local.gguf }
`;

let folder: ConfigTestFolder;
/** Named pipes made by a test: opened for writing afterwards, which frees a read stuck on one. */
const fifos: string[] = [];
/** Processes holding a pipe's writing end: killed afterwards. */
const writers: ChildProcess[] = [];

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  for (const fifo of fifos.splice(0)) {
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // No reader waits on it (ENXIO): nothing to free.
    }
  }
  for (const writer of writers.splice(0)) {
    if (writer.pid !== undefined && writer.exitCode === null) process.kill(-writer.pid, "SIGKILL");
  }
  await folder.remove();
});

const load = (options?: LoadConfigOptions) => folder.load(options);
const problemsOf = (options?: LoadConfigOptions) => folder.problemsOf(options);

function makeFifo(name: string, skip: (reason: string) => void): string {
  const fifo = join(folder.path, name);
  const made = spawnSync("mkfifo", [fifo], { encoding: "utf8" });
  if (made.status !== 0) {
    const reason = `mkfifo could not make a FIFO (${made.error?.message ?? made.stderr.trim()})`;
    console.warn(`Skipping the FIFO case: ${reason}.`);
    skip(reason);
  }
  fifos.push(fifo);
  return fifo;
}

/**
 * A bash whose fd 3 reads an unnamed pipe written by `writer` (bash's process substitution, as
 * `--config <(writer)` makes one); answers `/proc/PID/fd/3`, the path a process names it by.
 */
async function openPipe(writer: string, skip: (reason: string) => void): Promise<string> {
  const child = spawn("bash", ["-c", `exec 3< <(${writer}); echo ready; exec sleep 600`], {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
  });
  writers.push(child);
  const ready = await new Promise<boolean>((resolve) => {
    child.once("error", () => resolve(false));
    child.stdout?.once("data", () => resolve(true));
  });
  if (!ready || child.pid === undefined) skip("bash could not be started");
  return `/proc/${child.pid}/fd/3`;
}

describe("loadConfig: paths that are not regular files", () => {
  it("refuses a named pipe at once, without waiting for a writer", async ({ skip }) => {
    const fifo = makeFifo("tollgate.yaml", skip);
    const started = Date.now();
    expect(await problemsOf({ file: fifo, readTimeLimitMs: 60_000 })).toEqual([
      ": is a named pipe (FIFO), not a file (named by --config): opening it waits for a writer, at start and on every reload; write the config to a file and name that",
    ]);
    expect(Date.now() - started).toBeLessThan(1000);
    // ./tollgate.yaml in the working folder is there, though no file: refused, not taken for
    // "no file" (the built-in catalogue, which a reload would swap in for the configured one).
    const [problem] = await problemsOf({ readTimeLimitMs: 60_000 });
    expect(problem).toContain("is a named pipe (FIFO), not a file (named by working folder)");
  });

  it("refuses a device", async () => {
    expect(await problemsOf({ file: "/dev/null" })).toEqual([
      ": is a character device, not a file (named by --config); name a YAML file such as tollgate.yaml",
    ]);
  });

  it("reads a pipe a process holds open to its end, however late its writer writes", async ({ skip }) => {
    const file = await folder.write("source.yaml", CONFIG);
    const pipe = await openPipe(`sleep 0.5; cat '${file}'`, skip);
    const config = await load({ file: pipe });
    expect(config.models.map((model) => model.id)).toEqual(["local"]);
    expect(config.server.port).toBe(9000);
    // Read again (a reload): the pipe is at its end, and reads as empty.
    expect((await load({ file: pipe })).builtInCatalog).toBe(true);
  });

  it("takes a pipe's relative paths from the working folder: a pipe has none (regression: /dev/fd)", async ({
    skip,
  }) => {
    const file = await folder.write(
      "source.yaml",
      `database: sqlite:./data/tollgate.db
charge_journal_dir: journal
models:
  - id: local
    pricing: { input_per_million: "0.10", output_per_million: "0.40" }
    engine: { type: llama, model: models/local.gguf }
`,
    );
    const pipe = await openPipe(`cat '${file}'`, skip);
    const config = await load({ file: pipe });
    expect(config.database).toBe(`sqlite:${join(folder.path, "data", "tollgate.db")}`);
    expect(config.chargeJournalDir).toBe(join(folder.path, "journal"));
    const [model] = config.models;
    expect(model?.engine?.type === "llama" && model.engine.model).toBe(
      join(folder.path, "models", "local.gguf"),
    );
  });

  it("fails a read that does not end within the time limit", async ({ skip }) => {
    const pipe = await openPipe("exec sleep 600", skip);
    const started = Date.now();
    expect(await problemsOf({ file: pipe, readTimeLimitMs: 300 })).toEqual([
      ": could not be read within 0.3 s (named by --config): a hung network mount, or a pipe whose writer has not closed it? Name a local YAML file",
    ]);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

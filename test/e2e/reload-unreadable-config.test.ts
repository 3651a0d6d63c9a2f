/**
 * SIGHUP on a real `tollgate serve` process whose config path cannot be read to an end: a named
 * pipe (mkfifo) put there is refused at once, and a read that does not end (a pipe whose writer
 * never closes it, as a hung network mount would) fails after the time limit. Either way the
 * reload says so, and a later SIGHUP applies the good file put back. The reload used to wait for
 * ever in open() or read(), silently, and every later reload queued behind it (the next request
 * still charged the old prices), and the process did not exit after SIGTERM.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { killServeProcesses, type ServeProcess, startServeProcess } from "../support/serve-process.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-reload-unreadable-"));
const configFile = join(folder, "tollgate.yaml");
let server: ServeProcess;
let baseUrl: string;
let starterKey: string;
/** Holds a pipe's writing end open without writing (test 2). */
let writer: ChildProcess | undefined;

function writeConfig(modelId: string): void {
  writeFileSync(
    configFile,
    [
      "server: { host: 127.0.0.1, port: 0 }",
      "database: sqlite:./tollgate.db",
      "models:",
      `  - id: ${modelId}`,
      "    kind: chat",
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      '    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }',
      "",
    ].join("\n"),
  );
}

beforeAll(async () => {
  writeConfig("alpha");
  server = await startServeProcess(configFile, { cwd: folder });
  baseUrl = /listening on (http:\/\/\S+\/v1)/.exec(server.output())?.[1] ?? "";
  starterKey = /starter key: (sk-tg-\S+)/.exec(server.output())?.[1] ?? "";
});

afterAll(() => {
  if (writer?.pid !== undefined && writer.exitCode === null) process.kill(-writer.pid, "SIGKILL");
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

function logLines(): Record<string, unknown>[] {
  return server
    .output()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The log lines from the `from`th on whose message starts with `text`. */
function linesFrom(from: number, text: string): Record<string, unknown>[] {
  return logLines()
    .slice(from)
    .filter((line) => String(line.msg).startsWith(text));
}

async function waitFor<T>(what: string, find: () => T | undefined | Promise<T | undefined>, ms = 5000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) {
    const found = await find();
    if (found !== undefined) return found;
  }
  throw new Error(`no ${what} within ${ms} ms:\n${server.output()}`);
}

async function modelIds(): Promise<string[]> {
  const response = await fetch(`${baseUrl}/models`, { headers: { authorization: `Bearer ${starterKey}` } });
  return ((await response.json()) as { data: { id: string }[] }).data.map((model) => model.id);
}

function errorMessage(line: Record<string, unknown>): string {
  return String((line.err as { message?: unknown } | undefined)?.message);
}

describe("SIGHUP when the config path cannot be read to an end", () => {
  it("refuses a named pipe at once, and applies the good file of the next SIGHUP", async ({ skip }) => {
    rmSync(configFile);
    const made = spawnSync("mkfifo", [configFile], { encoding: "utf8" });
    if (made.status !== 0) {
      writeConfig("alpha");
      skip(`mkfifo could not make a FIFO (${made.error?.message ?? made.stderr.trim()})`);
    }
    const from = logLines().length;
    server.child.kill("SIGHUP");
    const failure = await waitFor(
      "refusal of the FIFO",
      () => linesFrom(from, "reloading the config failed")[0],
    );
    expect(errorMessage(failure)).toContain("is a named pipe (FIFO), not a file (named by --config)");
    expect(linesFrom(from, "SIGHUP: reloading the config")).toHaveLength(1);
    expect(await modelIds()).toEqual(["alpha"]);

    rmSync(configFile);
    writeConfig("beta");
    server.child.kill("SIGHUP");
    await waitFor("the good file applied", async () => ((await modelIds())[0] === "beta" ? true : undefined));
  }, 30_000);

  it("fails a read that does not end after 10 s; a SIGHUP meanwhile is served after it", async ({ skip }) => {
    // bash's fd 3 reads a pipe whose writer (a sleep) never writes nor closes it: /proc/PID/fd/3
    // names that pipe as /dev/fd/63 of `--config <(command)` does.
    writer = spawn("bash", ["-c", "exec 3< <(exec sleep 600); echo ready; exec sleep 600"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const ready = await new Promise<boolean>((resolve) => {
      writer?.once("error", () => resolve(false));
      writer?.stdout?.once("data", () => resolve(true));
    });
    if (!ready) skip("bash could not be started");
    rmSync(configFile);
    symlinkSync(`/proc/${writer.pid}/fd/3`, configFile);
    const from = logLines().length;
    const sent = Date.now();
    server.child.kill("SIGHUP");
    await waitFor("start of the reload", () => linesFrom(from, "SIGHUP: reloading the config")[0]);

    rmSync(configFile);
    writeConfig("gamma");
    server.child.kill("SIGHUP");
    await waitFor("note of the waiting reload", () => linesFrom(from, "SIGHUP while a reload runs")[0]);
    const failure = await waitFor(
      "failure of the read",
      () => linesFrom(from, "reloading the config failed")[0],
      20_000,
    );
    expect(errorMessage(failure)).toContain("could not be read within 10 s (named by --config)");
    expect(Date.now() - sent).toBeGreaterThanOrEqual(9_000);
    await waitFor("the good file applied", async () =>
      (await modelIds())[0] === "gamma" ? true : undefined,
    );
    expect(linesFrom(from, "SIGHUP: reloading the config")).toHaveLength(2);

    // Nothing is left blocked: SIGTERM ends the process.
    const exited = once(server.child, "exit");
    server.child.kill("SIGTERM");
    const [code] = (await Promise.race([exited, sleep(10_000).then(() => ["still running"])])) as unknown[];
    expect(code).toBe(0);
  }, 60_000);
});

/**
 * `tollgate models pull` and `tollgate serve` stopped by a signal (Ctrl-C, a container's stop)
 * wind their download down before they exit: they left its lock file (pull died at once; serve
 * closed the engine without waiting for the download to let go of it), which a replica of another
 * machine sharing the models folder then waited out (found by a download review).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { startServeProcess } from "../support/serve-process.ts";
import { createModelBytes, type ModelFileServer, startModelFileServer } from "./model-file-server.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const modelsFolder = makeTemporaryDirectory();
let server: ModelFileServer;
let open: () => void = () => {};
const children: ChildProcess[] = [];

beforeAll(async () => {
  const [fileServer, model] = await Promise.all([startModelFileServer(), createModelBytes(8)]);
  server = fileServer;
  server.files.set("/models/held.gguf", {
    bytes: model.bytes,
    gate: new Promise<void>((resolve) => {
      open = resolve;
    }),
  });
});

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  open();
  await server?.close();
});

/** The models folder's lock files. */
const lockFiles = () => readdirSync(modelsFolder).filter((name) => name.endsWith(".lock"));

/** A `models pull` of the held file, once it holds the download's lock (the file never comes). */
async function startPullHoldingLock(): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, TOLLGATE_MODELS_DIR: modelsFolder };
  delete env.TOLLGATE_CONFIG;
  const child = spawn(process.execPath, [cli, "models", "pull", `${server.baseUrl}/models/held.gguf`], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  child.stdout?.resume();
  await expect.poll(lockFiles, { timeout: 20_000 }).toHaveLength(1);
  return child;
}

describe.each([
  ["SIGTERM", 143],
  ["SIGINT", 130],
  // A dropped SSH session: it died at once, with no word, and left its lock file.
  ["SIGHUP", 129],
] as const)("models pull stopped by %s", (signal, exitCode) => {
  it("releases its lock file, keeps what it downloaded for a resume, and says so", async () => {
    const child = await startPullHoldingLock();
    let stderr = "";
    child.stderr?.on("data", (data: Buffer) => {
      stderr += data.toString();
    });
    const exited = once(child, "exit");
    child.kill(signal);
    // Pressed twice out of habit: the same request to stop, not one to leave the lock behind.
    // (The same signal: two different ones may be handled in either order.)
    child.kill(signal);
    const [code] = (await exited) as [number | null];
    expect(code).toBe(exitCode);
    expect(stderr).toContain(`Stopped by ${signal}: what was downloaded so far, if anything, is kept`);
    expect(lockFiles()).toEqual([]);
  });

  it("ends as it would have when its terminal is gone (stderr closed)", async () => {
    const child = await startPullHoldingLock();
    // Regression: its message to a closed stderr failed, and it exited 1.
    child.stderr?.destroy();
    const exited = once(child, "exit");
    child.kill(signal);
    const [code] = (await exited) as [number | null];
    expect(code).toBe(exitCode);
    expect(lockFiles()).toEqual([]);
  });
});

describe("serve stopped by SIGTERM while a model downloads", () => {
  it("releases the download's lock file before it exits", async () => {
    const folder = mkdtempSync(join(tmpdir(), "tollgate-serve-download-stop-"));
    const served = makeTemporaryDirectory();
    let previousModelsFolder: string | undefined;
    try {
      const configFile = join(folder, "tollgate.yaml");
      writeFileSync(
        configFile,
        [
          "server: { host: 127.0.0.1, port: 0 }",
          "database: sqlite:./tollgate.db",
          "models:",
          "  - id: held",
          "    kind: chat",
          '    pricing: { input_per_million: "1", output_per_million: "2" }',
          `    engine: { type: llama, model: "${server.baseUrl}/models/held.gguf", parallel: 1, threads: 1, gpu: false }`,
          "",
        ].join("\n"),
      );
      previousModelsFolder = process.env.TOLLGATE_MODELS_DIR;
      process.env.TOLLGATE_MODELS_DIR = served;
      const running = await startServeProcess(configFile, { cwd: folder });
      const lockFiles = () => readdirSync(served).filter((name) => name.includes(".lock"));
      await expect.poll(lockFiles, { timeout: 20_000 }).toHaveLength(1);
      const exited = once(running.child, "exit");
      running.child.kill("SIGTERM");
      await exited;
      expect(lockFiles()).toEqual([]);
    } finally {
      if (previousModelsFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
      else process.env.TOLLGATE_MODELS_DIR = previousModelsFolder;
      rmSync(folder, { recursive: true, force: true });
    }
  });
});

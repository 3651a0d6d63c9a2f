import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const cli = join(import.meta.dirname, "../../src/cli.ts");

/** The serve processes started here that have not exited (see {@link killServeProcesses}). */
const running = new Set<ChildProcess>();

/** A `tollgate serve` process, and everything it printed so far (stdout and stderr). */
export interface ServeProcess {
  child: ChildProcess;
  output(): string;
}

/**
 * Starts `tollgate serve --config FILE` as a process of its own (in `cwd`, without the shell's
 * TOLLGATE_CONFIG and TOLLGATE_DATABASE_URL, so the config file decides) and waits until it
 * listens. Throws with what it printed when it exits first, or does not listen within 20 s.
 */
export async function startServeProcess(
  configFile: string,
  options: { cwd?: string } = {},
): Promise<ServeProcess> {
  const child = spawn(process.execPath, [cli, "serve", "--config", configFile], {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, TOLLGATE_CONFIG: undefined, TOLLGATE_DATABASE_URL: undefined },
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  for (let attempt = 0; attempt < 400; attempt++) {
    if (output.includes("listening on")) return { child, output: () => output };
    if (child.exitCode !== null) throw new Error(`server exited: ${output}`);
    await sleep(50);
  }
  child.kill("SIGKILL");
  throw new Error(`server did not start: ${output}`);
}

/** Kills (SIGKILL) every serve process started here that still runs: for a test file's afterAll. */
export function killServeProcesses(): void {
  for (const child of running) child.kill("SIGKILL");
}

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const run = promisify(execFile);

/** One `tollgate serve` process. */
export interface ReplicaProcess {
  id: string;
  port: number;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` and waits for the exit; answers the exit code (or the signal's name). */
  stop(signal: NodeJS.Signals): Promise<number | string>;
}

/**
 * Starts `node src/cli.ts serve --config FILE` with `env` plus `PORT` and `TOLLGATE_REPLICA_ID`,
 * and waits until it listens and (unless told not to) `/ready` answers 200: its models are loaded.
 */
export async function startReplica(options: {
  id: string;
  port: number;
  configFile: string;
  env: NodeJS.ProcessEnv;
  /** Also wait for `/ready` (default), or only until it listens. */
  waitForReady?: boolean;
  timeoutMs?: number;
}): Promise<ReplicaProcess> {
  const child = spawn(process.execPath, [cli, "serve", "--config", options.configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...options.env, PORT: String(options.port), TOLLGATE_REPLICA_ID: options.id },
  });
  let output = "";
  const collect = (data: Buffer) => {
    output += data.toString();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const origin = `http://127.0.0.1:${options.port}`;
  const replica: ReplicaProcess = {
    id: options.id,
    port: options.port,
    origin,
    child,
    output: () => output,
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return await exited;
    },
  };
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`replica ${options.id} exited: ${output}`);
    if (output.includes("listening on")) {
      if (options.waitForReady === false) return replica;
      const ready = await fetch(`${origin}/ready`).then(
        (response) => response.status === 200,
        () => false,
      );
      if (ready) return replica;
    }
    await sleep(100);
  }
  child.kill("SIGKILL");
  throw new Error(`replica ${options.id} did not become ready: ${output}`);
}

/** Runs a CLI command with `env` and `--config FILE`; answers its exit code and output. */
export async function runCli(
  args: string[],
  options: { configFile: string; env: NodeJS.ProcessEnv },
): Promise<{ status: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, ...args, "--config", options.configFile], {
      env: options.env,
      encoding: "utf8",
    });
    return { status: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string };
    return {
      status: typeof failed.code === "number" ? failed.code : 1,
      stdout: failed.stdout ?? "",
      stderr: failed.stderr ?? String(error),
    };
  }
}

import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const cli = join(import.meta.dirname, "../../src/cli.ts");

/** The serve processes started here that have not exited (see {@link killServeProcesses}). */
const running = new Set<ChildProcess>();

/**
 * The environment of a `tollgate serve` a test starts: the shell's own, without the settings that
 * would win over the test's config file (TOLLGATE_CONFIG, TOLLGATE_DATABASE_URL, PORT, HOST) or
 * add an admin key it did not make.
 */
export function serveEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_ADMIN_KEY", "PORT", "HOST"])
    delete env[variable];
  return env;
}

/**
 * Writes `<folder>/tollgate.yaml` for a server on 127.0.0.1 (`port`, 0 unless given) with its
 * SQLite store at `./tollgate.db` beside it, and either no models or one upstream model
 * `upstream-chat` (upstream model `m`, priced 1 and 2 per million) at `upstreamBaseUrl`.
 * Answers the file's path.
 */
export function writeServeConfig(
  folder: string,
  options: { port?: number; upstreamBaseUrl?: string } = {},
): string {
  const configFile = join(folder, "tollgate.yaml");
  const models =
    options.upstreamBaseUrl === undefined
      ? ["models: []"]
      : [
          "models:",
          "  - id: upstream-chat",
          "    kind: chat",
          '    pricing: { input_per_million: "1", output_per_million: "2" }',
          `    engine: { type: openai, endpoints: [ { base_url: "${options.upstreamBaseUrl}" } ], model: m }`,
        ];
  writeFileSync(
    configFile,
    [
      `server: { host: 127.0.0.1, port: ${options.port ?? 0} }`,
      "database: sqlite:./tollgate.db",
      ...models,
      "",
    ].join("\n"),
  );
  return configFile;
}

/** A `tollgate serve` process, and everything it printed so far (stdout and stderr). */
export interface ServeProcess {
  child: ChildProcess;
  output(): string;
}

/**
 * Starts `tollgate serve --config FILE` (without `--config` when `configFile` is `undefined`: the
 * working folder's `tollgate.yaml`) as a process of its own (in `cwd`, in the
 * {@link serveEnvironment} with `env` added, with `args` after the command) and waits until it listens. Throws with what it printed when it exits first, or does not listen within 20 s.
 */
export async function startServeProcess(
  configFile: string | undefined,
  options: { cwd?: string; env?: NodeJS.ProcessEnv; args?: readonly string[] } = {},
): Promise<ServeProcess> {
  const config = configFile === undefined ? [] : ["--config", configFile];
  const child = spawn(process.execPath, [cli, "serve", ...config, ...(options.args ?? [])], {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...serveEnvironment(), ...options.env },
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

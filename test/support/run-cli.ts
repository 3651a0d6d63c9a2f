import { spawnSync } from "node:child_process";
import { join } from "node:path";

/** The CLI's entry point, run with this process's Node (24) as `tollgate` is. */
const cli = join(import.meta.dirname, "../../src/cli.ts");

/**
 * Runs `tollgate ARGS` to its end: in `cwd` (default this process's), with this process's
 * environment less the variables in `unset` (settings of the machine that would change what the
 * command reads) and plus `env`. Answers its exit code and output.
 */
export function runCli(
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; unset?: readonly string[] } = {},
): { code: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of options.unset ?? []) delete env[variable];
  Object.assign(env, options.env);
  const result = spawnSync(process.execPath, [cli, ...args], {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    encoding: "utf8",
    env,
    timeout: 30_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

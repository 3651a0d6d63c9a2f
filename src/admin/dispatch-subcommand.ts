import { CliError, type OutputSink } from "./cli-error.ts";
import { isHelpRequested } from "./parse-command-arguments.ts";

/** Runs one subcommand of a command group (`tollgate accounts create ...`). */
export type SubcommandHandler = (argv: readonly string[]) => Promise<void>;

/**
 * Dispatches `argv` (what follows the group name) to its subcommand's handler; `help` prints the
 * group's usage, `--help` or `-h` after a subcommand prints that subcommand's, and a missing or
 * unknown subcommand is a {@link CliError} that shows the group's usage.
 */
export async function dispatchSubcommand(options: {
  group: string;
  usage: Readonly<Record<string, string>>;
  handlers: Readonly<Record<string, SubcommandHandler>>;
  argv: readonly string[];
  out: OutputSink;
}): Promise<void> {
  const [subcommand, ...rest] = options.argv;
  const usageLines = ["Usage:", ...Object.values(options.usage).map((usage) => `  ${usage}`)];
  if (subcommand === "help" || subcommand === "--help" || subcommand === "-h") {
    for (const line of usageLines) options.out.write(line);
    return;
  }
  if (subcommand === undefined) throw new CliError(["Missing subcommand.", ...usageLines].join("\n"));
  const handler = Object.hasOwn(options.handlers, subcommand) ? options.handlers[subcommand] : undefined;
  if (handler === undefined) {
    throw new CliError([`Unknown subcommand '${options.group} ${subcommand}'.`, ...usageLines].join("\n"));
  }
  if (isHelpRequested(rest)) {
    options.out.write(`Usage: ${options.usage[subcommand] ?? usageLines.join("\n")}`);
    return;
  }
  await handler(rest);
}

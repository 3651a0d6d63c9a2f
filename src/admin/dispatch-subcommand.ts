import { CliError, type OutputSink } from "./cli-error.ts";
import { isHelpRequested } from "./parse-command-arguments.ts";

/** Runs one subcommand of a command group (`tollgate accounts create ...`). */
export type SubcommandHandler = (argv: readonly string[]) => Promise<void>;

/** A command group's usage: one line per subcommand, by name. */
export type SubcommandUsage = Readonly<Record<string, string>>;

/**
 * Dispatches `argv` (what follows the group name) to its subcommand's handler; help is written
 * as {@link writeSubcommandHelp} says, and a missing or unknown subcommand is a
 * {@link CliError} that shows the group's usage.
 */
export async function dispatchSubcommand(options: {
  group: string;
  usage: SubcommandUsage;
  handlers: Readonly<Record<string, SubcommandHandler>>;
  argv: readonly string[];
  out: OutputSink;
}): Promise<void> {
  if (writeSubcommandHelp(options)) return;
  const [subcommand] = options.argv;
  const usageLines = listUsageLines(options.usage);
  if (subcommand === undefined) throw new CliError(["Missing subcommand.", ...usageLines].join("\n"));
  const handler = Object.hasOwn(options.handlers, subcommand) ? options.handlers[subcommand] : undefined;
  if (handler === undefined) throw unknownSubcommand(options.group, subcommand, options.usage);
  await handler(options.argv.slice(1));
}

function unknownSubcommand(group: string, subcommand: string, usage: SubcommandUsage): CliError {
  return new CliError([`Unknown subcommand '${group} ${subcommand}'.`, ...listUsageLines(usage)].join("\n"));
}

/**
 * Writes the usage that `argv` (what follows the group name) asks for, and returns whether it
 * did: `help`, `--help` or `-h` as the subcommand gets the group's usage (or, followed by a known
 * subcommand, that subcommand's), `--help` or `-h` where an option may stand after a known
 * subcommand that subcommand's (as an option's value, `--note -h`, it asks for nothing); after an
 * unknown one, it throws the unknown subcommand's {@link CliError}. It reads nothing but the
 * arguments, so the CLI answers help before it loads the config or opens the store.
 */
export function writeSubcommandHelp(options: {
  group: string;
  usage: SubcommandUsage;
  argv: readonly string[];
  out: OutputSink;
}): boolean {
  const [subcommand, ...rest] = options.argv;
  if (subcommand === "help" || subcommand === "--help" || subcommand === "-h") {
    // `accounts help create` and `accounts --help create` ask about `create`.
    const named = rest[0];
    if (named !== undefined && Object.hasOwn(options.usage, named)) {
      options.out.write(`Usage: ${options.usage[named]}`);
      return true;
    }
    for (const line of listUsageLines(options.usage)) options.out.write(line);
    return true;
  }
  if (subcommand === undefined) return false;
  const usage = Object.hasOwn(options.usage, subcommand) ? options.usage[subcommand] : undefined;
  // With the usage line, `-h` as an option's value (`credit acme 1 --note -h`) is that value.
  if (!isHelpRequested(rest, usage)) return false;
  // `keys rotate --help`: refused here, before the config is read or the store opened.
  if (usage === undefined) throw unknownSubcommand(options.group, subcommand, options.usage);
  options.out.write(`Usage: ${usage}`);
  return true;
}

function listUsageLines(usage: SubcommandUsage): string[] {
  return ["Usage:", ...Object.values(usage).map((line) => `  ${line}`)];
}

import type { StoreFailureContext } from "./explain-store-failure.ts";
import { quoteForShell } from "./quote-for-shell.ts";

/** Options of the store commands that take a value (`--note TEXT`), to tell values from positionals. */
const OPTIONS_WITH_VALUES = new Set(["--note", "--balance", "--format", "--account", "--name", "--models"]);

/**
 * What the store command `command ARGS` (`accounts`, `["credit", "alice", "5"]`) does, for the
 * message should its store fail under it (explain-store-failure.ts): its name, whether it changes
 * anything, and a command that shows whether a change it was making was made. The check names
 * the same `--config` as the command; it never repeats a key (`keys revoke` accepts a whole one).
 */
export function describeStoreCommand(
  command: string,
  args: readonly string[],
  configFile: string | undefined,
): Pick<StoreFailureContext, "command" | "effect" | "check"> {
  const config = configFile === undefined ? "" : ` --config ${quoteForShell(configFile)}`;
  const tollgate = (words: string) => `\`tollgate ${words}${config}\``;
  const subcommand = args[0] ?? "";
  const positionals = listPositionals(args.slice(1));
  const accountOption = readOption(args, "--account");
  if (command === "audit") {
    return args.includes("--repair-spent")
      ? { command: "audit --repair-spent", effect: "repairs", check: tollgate("audit") }
      : { command, effect: "reads", check: undefined };
  }
  if (command === "accounts" && (subcommand === "create" || subcommand === "credit")) {
    const account = positionals[0];
    return {
      command: `accounts ${subcommand}`,
      effect: "writes",
      check: tollgate(account === undefined ? "accounts list" : `accounts show ${quoteForShell(account)}`),
    };
  }
  if (command === "keys" && ["create", "revoke", "update"].includes(subcommand)) {
    const list =
      subcommand === "create" && accountOption !== undefined
        ? `keys list --account ${quoteForShell(accountOption)}`
        : "keys list";
    return { command: `keys ${subcommand}`, effect: "writes", check: tollgate(list) };
  }
  const named = command === "accounts" || command === "keys" ? `${command} ${subcommand}`.trim() : command;
  return { command: named, effect: "reads", check: undefined };
}

/** The arguments that are neither options nor the value of one. */
function listPositionals(args: readonly string[]): string[] {
  const positionals: string[] = [];
  for (let index = 0; index < args.length; index++) {
    const argument = args[index]!;
    if (argument === "--") {
      positionals.push(...args.slice(index + 1));
      break;
    }
    if (argument.startsWith("-")) {
      if (OPTIONS_WITH_VALUES.has(argument)) index++;
      continue;
    }
    positionals.push(argument);
  }
  return positionals;
}

/** The value of `--NAME VALUE` or `--NAME=VALUE`, if given. */
function readOption(args: readonly string[], name: string): string | undefined {
  for (let index = 0; index < args.length; index++) {
    const argument = args[index]!;
    if (argument === name) return args[index + 1];
    if (argument.startsWith(`${name}=`)) return argument.slice(name.length + 1);
  }
  return undefined;
}

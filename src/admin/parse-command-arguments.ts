import { parseArgs } from "node:util";
import { CliError } from "./cli-error.ts";

/** The option definitions of one subcommand, as `node:util` `parseArgs` takes them. */
export type CommandOptions = Record<string, { type: "string" | "boolean"; short?: string }>;

/** Parsed arguments of one subcommand: its options by name and its positionals. */
export interface CommandArguments {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * Parses a subcommand's own arguments strictly: an unknown option, a missing option value, an
 * option given more than once or a wrong number of positionals is a {@link CliError} that ends
 * with the usage line.
 *
 * The argument after an option that takes a value is that value even when it starts with a
 * single "-" (`--note -h`, `--seed -1`), as getopt reads it, unless it is one of the command's
 * own short options. A word that starts with "--" is never a value written apart (see
 * {@link isLongOptionLike}): `--note --balance 5` forgot the note, and is refused as a value
 * missing rather than read as the note "--balance"; `--note=--x` writes such a value.
 */
export function parseCommandArguments(
  argv: readonly string[],
  definition: { options: CommandOptions; positionals: number; usage: string },
): CommandArguments {
  let parsed: ReturnType<typeof parseTokens>;
  try {
    parsed = parseTokens(attachDashValues(argv, definition.options), definition.options);
  } catch (error) {
    throw new CliError(`${describeParseError(error, definition.options)}\nUsage: ${definition.usage}`, {
      cause: error,
    });
  }
  refuseRepeatedOptions(parsed.tokens, definition.usage);
  if (parsed.positionals.length !== definition.positionals) {
    const problem =
      parsed.positionals.length < definition.positionals
        ? describeMissingArguments(definition.usage, parsed.positionals.length, definition.positionals)
        : `Unexpected argument '${parsed.positionals[definition.positionals] ?? ""}'.`;
    throw new CliError(`${problem}\nUsage: ${definition.usage}`);
  }
  const values: Record<string, string | boolean | undefined> = {};
  // Without `multiple` parseArgs keeps the last of repeated options, which are refused above.
  for (const [name, value] of Object.entries(parsed.values))
    values[name] = Array.isArray(value) ? undefined : value;
  return { values, positionals: parsed.positionals };
}

function parseTokens(args: string[], options: CommandOptions) {
  return parseArgs({ args, options, allowPositionals: true, strict: true, tokens: true });
}

/**
 * `argv` with each value that starts with "-" written onto its option (`--note`, `-h` becomes
 * `--note=-h`), which parseArgs would otherwise refuse as ambiguous: see
 * {@link parseCommandArguments}.
 */
function attachDashValues(argv: readonly string[], options: CommandOptions): string[] {
  const attached: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === "--") return [...attached, ...argv.slice(index)];
    const next = argv[index + 1];
    const option = findOption(argument, options);
    if (
      next === undefined ||
      isLongOptionLike(next) ||
      !next.startsWith("-") ||
      argument.includes("=") ||
      option?.type !== "string" ||
      findOption(next, options) !== undefined
    ) {
      attached.push(argument);
      continue;
    }
    attached.push(argument.startsWith("--") ? `${argument}=${next}` : `${argument}${next}`);
    index++;
  }
  return attached;
}

/**
 * Whether `argument` starts with "--" ("--" itself, `--help`, `--balance`, `--anything`): it is
 * never taken as the value of the option before it, so a forgotten value cannot swallow
 * `--help` or another command's option (`keys update ID --name --help` renamed the key to
 * "--help"; `accounts credit acme --note --balance 5` credited 5 with the note "--balance").
 */
function isLongOptionLike(argument: string): boolean {
  return argument.startsWith("--");
}

/** The definition of the option `argument` names (`--note`, `--note=x`, `-n`), if it is one. */
function findOption(argument: string, options: CommandOptions): CommandOptions[string] | undefined {
  if (argument.startsWith("--")) {
    const name = argument.slice(2).split("=")[0]!;
    return Object.hasOwn(options, name) ? options[name] : undefined;
  }
  if (!argument.startsWith("-") || argument.length < 2) return undefined;
  return Object.values(options).find((option) => option.short === argument[1]);
}

/**
 * An option given twice is refused rather than the last one taken: `--balance 100 --balance 1`
 * created the account with 1, `--account acme --account ACME` made the key on ACME.
 */
function refuseRepeatedOptions(tokens: readonly { kind: string; name?: string }[], usage: string): void {
  const counts = new Map<string, number>();
  for (const token of tokens) {
    if (token.kind !== "option" || token.name === undefined) continue;
    counts.set(token.name, (counts.get(token.name) ?? 0) + 1);
  }
  for (const [name, count] of counts) {
    if (count < 2) continue;
    throw new CliError(
      `--${name} is given ${count === 2 ? "twice" : `${count} times`}; give it once.\nUsage: ${usage}`,
    );
  }
}

/**
 * "Missing argument AMOUNT.": the positionals the usage line names (`NAME|ID` in
 * `tollgate accounts credit NAME|ID AMOUNT [--note TEXT]`) from the first one not given.
 */
function describeMissingArguments(usage: string, given: number, wanted: number): string {
  const missing = namePositionals(usage).slice(given, wanted);
  if (missing.length === 0) return "Missing argument.";
  return missing.length === 1 ? `Missing argument ${missing[0]}.` : `Missing arguments ${missing.join(" ")}.`;
}

/**
 * The positionals of a usage line, in order: its words in capitals outside brackets that are no
 * option's value (`NAME|ID` of `--account NAME|ID` is not one).
 */
function namePositionals(usage: string): string[] {
  const names: string[] = [];
  let depth = 0;
  let afterOption = false;
  for (const word of usage.split(/\s+/)) {
    const outside = depth === 0 && !word.startsWith("[");
    depth += (word.match(/\[/g)?.length ?? 0) - (word.match(/\]/g)?.length ?? 0);
    if (!outside) continue;
    if (word.startsWith("-")) {
      afterOption = true;
      continue;
    }
    if (!afterOption && /^[A-Z][A-Z0-9_|]*\/?$/.test(word)) names.push(word);
    afterOption = false;
  }
  return names;
}

/**
 * Whether the arguments ask for help: `--help` or `-h` where an option may stand, before a `--`
 * (after which everything is a positional), so `tollgate keys create --account acme --help` shows
 * the usage instead of refusing an unknown option. Given the command's `usage` line, the
 * argument after an option it shows with a value (`[--note TEXT]`) is that value, as
 * {@link parseCommandArguments} reads it: `accounts credit acme 1 --note -h` credits, with the
 * note "-h", rather than printing the usage and exiting 0 without crediting. `--help` is never
 * such a value: `--note --help` asks for help, and changes nothing. Without `usage`, `-h` and
 * `--help` anywhere ask for help.
 *
 * `--help=yes` is refused here (a {@link CliError}), before the config is read or the store
 * opened, rather than taken for an unknown option.
 */
export function isHelpRequested(argv: readonly string[], usage?: string): boolean {
  const options = usage === undefined ? new Map<string, boolean>() : readUsageOptions(usage);
  const nameOf = (argument: string) => (argument.startsWith("--") ? argument.slice(2).split("=")[0]! : "");
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === "--") return false;
    if (argument === "--help" || argument === "-h") return true;
    if (argument.startsWith("--help=")) {
      throw new CliError(
        `--help takes no value: write --help alone for the usage.${usage === undefined ? "" : `\nUsage: ${usage}`}`,
      );
    }
    const next = argv[index + 1];
    const takesValue = !argument.includes("=") && options.get(nameOf(argument)) === true;
    if (takesValue && next !== undefined && !isLongOptionLike(next)) index++;
  }
  return false;
}

/**
 * The options a usage line shows, by name, and whether each takes a value: one followed by a
 * word that is no option (`--note TEXT`, `--format table|json`) does, one followed by `]` or
 * `|` (`--all-models]`, `--no-rpm]`) does not.
 */
function readUsageOptions(usage: string): Map<string, boolean> {
  const options = new Map<string, boolean>();
  for (const match of usage.matchAll(/--([a-z][a-z0-9-]*)(\s+[^\s[\]|-])?/g)) {
    options.set(match[1]!, match[2] !== undefined);
  }
  return options;
}

/**
 * A whole number written in digits only, from 0 to `max`; `undefined` for anything else ("",
 * " 80", "-1", "0x50", "8e3", "1.0"), which `Number()` would take.
 */
export function readWholeNumber(text: string, max: number): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) && value <= max ? value : undefined;
}

/** The string value of an option, or `undefined` when it was not given. */
export function stringOption(values: CommandArguments["values"], name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

function describeParseError(error: unknown, options: CommandOptions): string {
  if (!(error instanceof Error)) return "Invalid arguments.";
  const code = "code" in error ? error.code : undefined;
  const option = /'([^']+)'/.exec(error.message)?.[1];
  switch (code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      // `accounts credit acme -5` read as an option: say what the operator meant to write.
      if (option !== undefined && /^-[0-9.]/.test(option)) {
        return `'${option}' is a negative number, which no argument takes: amounts, limits and counts are positive.`;
      }
      // `--help=yes`, which parseArgs names without its value.
      if (option === "--help") return "--help takes no value: write --help alone for the usage.";
      return `Unknown option '${option ?? "?"}'.`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE": {
      const name = (option ?? "?").replace(/ <value>$/, "");
      // `--all-models=yes`: parseArgs says it "does not take an argument".
      if (findOption(name, options)?.type === "boolean") return `Option '${name}' takes no value.`;
      return `Option '${name}' needs a value (write --option=VALUE for a value that starts with "-").`;
    }
    default:
      return error.message;
  }
}

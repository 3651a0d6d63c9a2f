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
 * Parses a subcommand's own arguments strictly: an unknown option, a missing option value or
 * a wrong number of positionals is a {@link CliError} that ends with the usage line.
 */
export function parseCommandArguments(
  argv: readonly string[],
  definition: { options: CommandOptions; positionals: number; usage: string },
): CommandArguments {
  let parsed: {
    values: Record<string, string | boolean | (string | boolean)[] | undefined>;
    positionals: string[];
  };
  try {
    parsed = parseArgs({
      args: [...argv],
      options: definition.options,
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new CliError(`${describeParseError(error)}\nUsage: ${definition.usage}`, { cause: error });
  }
  if (parsed.positionals.length !== definition.positionals) {
    const problem =
      parsed.positionals.length < definition.positionals
        ? describeMissingArguments(definition.usage, parsed.positionals.length, definition.positionals)
        : `Unexpected argument '${parsed.positionals[definition.positionals] ?? ""}'.`;
    throw new CliError(`${problem}\nUsage: ${definition.usage}`);
  }
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, value] of Object.entries(parsed.values)) {
    // Without `multiple`, parseArgs keeps the last of repeated options; arrays do not occur.
    values[name] = Array.isArray(value) ? value.at(-1) : value;
  }
  return { values, positionals: parsed.positionals };
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
    if (!afterOption && /^[A-Z][A-Z0-9_|]*$/.test(word)) names.push(word);
    afterOption = false;
  }
  return names;
}

/**
 * Whether the arguments ask for help: `--help` or `-h` anywhere before a `--` (after which
 * everything is a positional), so `tollgate keys create --account acme --help` shows the usage
 * instead of refusing an unknown option.
 */
export function isHelpRequested(argv: readonly string[]): boolean {
  for (const argument of argv) {
    if (argument === "--") return false;
    if (argument === "--help" || argument === "-h") return true;
  }
  return false;
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

function describeParseError(error: unknown): string {
  if (!(error instanceof Error)) return "Invalid arguments.";
  const code = "code" in error ? error.code : undefined;
  const option = /'([^']+)'/.exec(error.message)?.[1];
  switch (code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      // `accounts credit acme -5` read as an option: say what the operator meant to write.
      if (option !== undefined && /^-[0-9.]/.test(option)) {
        return `'${option}' is a negative number, which no argument takes: amounts, limits and counts are positive.`;
      }
      return `Unknown option '${option ?? "?"}'.`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      return `Option '${(option ?? "?").replace(/ <value>$/, "")}' needs a value (write --option=VALUE for a value that starts with "-").`;
    default:
      return error.message;
  }
}

/**
 * What is wrong with a configuration: every problem found, each naming the field (or the
 * environment variable) and the fix. {@link ConfigError} is thrown by `loadConfig` once, with all
 * of them, so an operator fixes the file in one pass.
 */

/** A field's place in the configuration: keys and list indexes, `["models", 1, "pricing"]`. */
export type ConfigPath = readonly (string | number)[];

/** One problem in a configuration. */
export interface ConfigProblem {
  /**
   * The field with its path (`models[1].pricing.input_per_million`), an environment variable
   * (`PORT (environment)`), or "" for a problem with the whole file (a YAML syntax error).
   */
  field: string;
  /** What is wrong and how to fix it. */
  message: string;
  /** 1-based line in the file where the field is, when known. */
  line: number | undefined;
  /** 1-based column, given for YAML syntax errors. */
  column: number | undefined;
  /** How many problems it stands for, where it sums up several ("and 4 more ..."); else one. */
  counts?: number;
}

/** An invalid or unreadable configuration. The message lists every problem, one per line. */
export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[];
  /** The file read, or `undefined` for the built-in default configuration. */
  readonly source: string | undefined;

  constructor(options: { problems: readonly ConfigProblem[]; source: string | undefined }) {
    super(describeProblems(options.problems, options.source));
    this.name = "ConfigError";
    this.problems = options.problems;
    this.source = options.source;
    // What the operator must fix is the message: no frames of the code that found it, in a log
    // line of a refused reload or anywhere else.
    this.stack = `${this.name}: ${this.message}`;
  }
}

/** `["models", 1, "pricing"]` → `models[1].pricing`; keys that are not plain words are quoted. */
export function formatConfigPath(path: ConfigPath): string {
  let text = "";
  for (const segment of path) {
    if (typeof segment === "number") text += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) text += text === "" ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text;
}

/** One problem as a line of text: `field: message (line N)`. */
export function formatConfigProblem(problem: ConfigProblem): string {
  if (problem.field === "") {
    const position =
      problem.line === undefined
        ? ""
        : problem.column === undefined
          ? `line ${problem.line}: `
          : `line ${problem.line}, column ${problem.column}: `;
    return `${position}${problem.message}`;
  }
  const line = problem.line === undefined ? "" : ` (line ${problem.line})`;
  return `${problem.field}: ${problem.message}${line}`;
}

function describeProblems(problems: readonly ConfigProblem[], source: string | undefined): string {
  // A file that is fine is not blamed for the environment's variables (`PORT=abc`).
  const fromEnvironment =
    problems.length > 0 && problems.every(({ field }) => field.endsWith(" (environment)"));
  const where =
    source === undefined
      ? "The built-in configuration (with environment overrides)"
      : fromEnvironment
        ? `${source} with the environment's overrides`
        : source;
  // A line that sums up several counts as those it stands for: "2 problems" above one problem
  // and "and 4 more" read as a miscount.
  const total = problems.reduce((sum, problem) => sum + (problem.counts ?? 1), 0);
  const count = total === 1 ? "1 problem" : `${total} problems`;
  const lines = problems.map((problem) => `  - ${indentContinuation(formatConfigProblem(problem))}`);
  return `${where} is not a valid Tollgate configuration (${count}):\n${lines.join("\n")}`;
}

function indentContinuation(text: string): string {
  return text.replace(/\n/g, "\n    ");
}

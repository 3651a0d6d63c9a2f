import type { LineCounter, YAMLError } from "yaml";
import type { ConfigProblem } from "./config-error.ts";
import { findClosingQuote, maskYamlValues } from "./mask-yaml-values.ts";

/**
 * The problems of a config file YAML could not parse, in the operator's words rather than the
 * library's: a second document is named as such (the library said "please use
 * YAML.parseAllDocuments()"), and an unquoted `${VAR}` in a flow mapping (`server: { port:
 * ${PORT} }`), where YAML reads `{` as the start of a mapping and reported 24 to 40 errors on its
 * line and the lines after it, is one problem that says to quote it (the errors after it are
 * counted). Values in the lines quoted are masked.
 */
export function describeYamlErrors(
  errors: readonly YAMLError[],
  text: string,
  lineCounter: LineCounter,
): ConfigProblem[] {
  const lines = text.split(/\r?\n/);
  const problems: ConfigProblem[] = [];
  const hinted = new Set<number>();
  // After an unquoted `${`, YAML reads the rest of the file as the mapping it thinks it opened:
  // the errors that follow are counted, not listed.
  let followingErrors = 0;
  for (const error of errors) {
    const { line, col } = lineCounter.linePos(error.pos[0]);
    if (error.code === "MULTIPLE_DOCS") {
      problems.push({
        field: "",
        message: `the config file must hold one YAML document (found a second '---' at line ${line}); remove that line, or the document it starts`,
        line: undefined,
        column: undefined,
      });
      continue;
    }
    const lineText = lines[line - 1] ?? "";
    const variable = findUnquotedVariable(lineText);
    if (variable !== undefined) {
      // The errors of that line all come from it: one problem says what to do.
      if (!hinted.has(line)) {
        hinted.add(line);
        problems.push({
          field: "",
          message: `${variable.reference} is not quoted: YAML reads "{" as the start of a mapping there (in { ... } or [ ... ]); write "${variable.reference}"`,
          line,
          column: variable.column,
        });
      }
      continue;
    }
    if (hinted.size > 0 && line > Math.min(...hinted)) {
      followingErrors += 1;
      continue;
    }
    const snippet =
      lineText.length > 0 && lineText.length <= 200
        ? `\n${maskYamlValues(lineText)}\n${" ".repeat(col - 1)}^`
        : "";
    problems.push({
      field: "",
      message: `YAML syntax error: ${describeYamlMessage(error.message)}${snippet}`,
      line,
      column: col,
    });
  }
  if (followingErrors > 0) {
    problems.push({
      field: "",
      message: `and ${followingErrors} more YAML syntax ${followingErrors === 1 ? "error" : "errors"} after line ${Math.min(...hinted)}, most likely from the unquoted \${...} there: quote it, then check again`,
      line: undefined,
      column: undefined,
      counts: followingErrors,
    });
  }
  return problems;
}

/**
 * The library's messages that quote what follows them from the file, each with what it should say
 * instead: a value YAML read as a tag (`!`) or an alias (`*`), a directive (`%`), a bad escape.
 */
const QUOTING_MESSAGES: readonly [RegExp, string][] = [
  [/^Unresolved tag: /, "Unresolved tag: a value that starts with ! is read as a YAML tag; quote it"],
  [
    /^Unresolved alias \(the anchor must be set before the alias\): /,
    "Unresolved alias: a value that starts with * is read as a YAML alias; quote it",
  ],
  [
    /^(?:Unknown directive|Unsupported YAML version) /,
    "Unknown directive: a line that starts with % is read as a YAML directive; quote its value",
  ],
  [
    /^Invalid escape sequence /,
    "Invalid escape sequence in a double-quoted value: write it in single quotes, or double each backslash",
  ],
  [
    /^(?:Not a valid tag|Could not resolve tag|Verbatim tags aren't resolved)|^The .* tag has no suffix$/,
    "Invalid tag: a value that starts with ! is read as a YAML tag; quote it",
  ],
  [/^Not a YAML token: /, "Not a YAML token"],
  [/^Block scalar header includes extra characters: /, "Block scalar header includes extra characters"],
];

/**
 * A YAML error's message without the text of the file it quotes: after a stray `]`, the next
 * token's (`Unexpected double-quoted-scalar token in YAML stream: "\"<the admin key>\""`), or a
 * key that starts with `!` or `*` (`Unresolved tag: !<the key>`), went to stderr, or to the log on
 * a reload, unmasked. The line quoted below it, masked, and its caret show where the problem is.
 */
export function describeYamlMessage(message: string): string {
  for (const [pattern, replacement] of QUOTING_MESSAGES) if (pattern.test(message)) return replacement;
  return message.replace(/: "(?:[^"\\]|\\.)*"$/s, "");
}

/**
 * The first `${...}` of `line` outside quotes and comments, with its 1-based column; the
 * reference ends at its `}` (or at the end of the line).
 */
function findUnquotedVariable(line: string): { reference: string; column: number } | undefined {
  let index = 0;
  while (index < line.length) {
    const character = line[index];
    if (character === '"' || character === "'") {
      index = findClosingQuote(line, index) + 1;
    } else if (character === "#" && (index === 0 || /\s/.test(line[index - 1] as string))) {
      return undefined;
    } else if (character === "$" && line[index + 1] === "{") {
      const close = line.indexOf("}", index);
      const reference = close === -1 ? line.slice(index) : line.slice(index, close + 1);
      return { reference, column: index + 1 };
    } else {
      index += 1;
    }
  }
  return undefined;
}

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
      message: `YAML syntax error: ${withoutSource(error.message)}${snippet}`,
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
    });
  }
  return problems;
}

/**
 * A YAML error's message without the text of the file it quotes: after a stray `]`, the next
 * token's (`Unexpected double-quoted-scalar token in YAML stream: "\"<the admin key>\""`) went to
 * stderr, or to the log on a reload, unmasked. The line quoted below it, masked, and its caret
 * show where the problem is.
 */
function withoutSource(message: string): string {
  return message
    .replace(/: "(?:[^"\\]|\\.)*"$/s, "")
    .replace(/^(Not a YAML token|Block scalar header includes extra characters): .*$/s, "$1");
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

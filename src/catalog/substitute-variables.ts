/**
 * `${VAR}` in configuration strings: replaced by the environment variable's value. `$${` writes a
 * literal `${`. A variable that is not set is a problem naming the variable and the field,
 * except in fields where an empty value means "unset" (such as `admin_key`).
 */
import type { ConfigPath } from "./config-error.ts";
import { type ConfigIssues, isMapping } from "./config-fields.ts";

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface SubstituteVariablesOptions {
  env: NodeJS.ProcessEnv;
  issues: ConfigIssues;
  /**
   * Fields where a variable that is not set makes the value "" instead of a problem; `whole`: the
   * value is the reference alone (`"${NAME}"`, not part of a longer text).
   */
  mayBeUnset: (path: ConfigPath, whole: boolean) => boolean;
}

/** A copy of the parsed tree with every `${VAR}` in its string values replaced. Keys are kept. */
export function substituteVariables(
  value: unknown,
  options: SubstituteVariablesOptions,
  path: ConfigPath = [],
): unknown {
  if (typeof value === "string") return substituteInString(value, options, path);
  if (Array.isArray(value))
    return value.map((item, index) => substituteVariables(item, options, [...path, index]));
  if (isMapping(value)) {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // Defined, not assigned: `__proto__: {...}` set the copy's prototype, whose values the
      // readers took (a model's pricing, the server's port) while no check of keys saw it.
      Object.defineProperty(copy, key, {
        value: substituteVariables(item, options, [...path, key]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  }
  return value;
}

function substituteInString(text: string, options: SubstituteVariablesOptions, path: ConfigPath): string {
  if (!text.includes("${")) return text;
  let result = "";
  let index = 0;
  while (index < text.length) {
    if (text.startsWith("$${", index)) {
      result += "${";
      index += 3;
      continue;
    }
    if (!text.startsWith("${", index)) {
      result += text[index];
      index += 1;
      continue;
    }
    const end = text.indexOf("}", index + 2);
    if (end === -1) {
      options.issues.add(
        path,
        `has "\${" without a closing "}"; write \${NAME} to read an environment variable, or $\${ for a literal "\${"`,
      );
      return text;
    }
    const name = text.slice(index + 2, end);
    index = end + 1;
    if (!VARIABLE_NAME.test(name)) {
      options.issues.add(
        path,
        `"\${${name}}" is not an environment variable reference; names are letters, digits and _, such as \${UPSTREAM_KEY}`,
      );
      continue;
    }
    const variable = options.env[name];
    if (variable === undefined) {
      // Unset where that may be: the value is empty, not the rest of it (`"Bearer "`, which
      // the header checks refused, stopping a CLI command that needs no upstream secret).
      if (options.mayBeUnset(path, text === `\${${name}}`)) return "";
      options.issues.add(
        path,
        `environment variable ${name} is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file`,
      );
      continue;
    }
    result += variable;
  }
  return result;
}

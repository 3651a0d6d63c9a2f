import { AppError } from "../errors/app-error.ts";
import type { JsonSchema } from "./engine.ts";

/**
 * A function's parameters schema with an object root: a call's arguments are a JSON object
 * (OpenAI's contract, and what clients parse), so a root without `type` (`{}`, a bare
 * `properties`, a `$ref`) gets `type: "object"`, and a root that declares another type is
 * refused with 400 naming `param`, as OpenAI refuses it. The HTTP edge checks every tool with it;
 * the local engine builds its grammar from what it returns.
 */
export function requireObjectParameters(name: string, parameters: JsonSchema, param: string): JsonSchema {
  const { type } = parameters;
  if (type === undefined) return { type: "object", ...parameters };
  if (
    type === "object" ||
    (Array.isArray(type) && type.length > 0 && type.every((each) => each === "object"))
  ) {
    return parameters;
  }
  throw new AppError(
    "invalid_value",
    `Invalid schema for the function '${name}' in '${param}': the root must be of type "object" (a call's arguments are a JSON object), not ${JSON.stringify(type)}.`,
    { param },
  );
}

import { AppError } from "../errors/app-error.ts";
import { cutText } from "../errors/cut-text.ts";

/**
 * The 400 for a chat body whose `tools` or `tool_choice` use a kind of tool other than
 * `function` (OpenAI's `custom` tools, `allowed_tools` choices, ...), or `undefined`. Asked when
 * the body failed its schema, whose first complaint would be the missing `function` object:
 * that misleads a client that sent another kind on purpose.
 */
export function refuseUnsupportedToolTypes(body: unknown): AppError | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const { tools, tool_choice: choice } = body as { tools?: unknown; tool_choice?: unknown };
  if (Array.isArray(tools)) {
    for (const [index, tool] of tools.entries()) {
      const type = typeOf(tool);
      if (type !== undefined && type !== "function") return unsupported(`tools[${index}].type`, type);
    }
  }
  const type = typeOf(choice);
  if (type !== undefined && type !== "function") return unsupported("tool_choice.type", type);
  return undefined;
}

/** The `type` string of an object, if it has one. */
function typeOf(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const type = (value as { type?: unknown }).type;
  return typeof type === "string" ? type : undefined;
}

function unsupported(param: string, type: string): AppError {
  // A choice's type is a kind of choice (`allowed_tools`), not of tool.
  const kind = param === "tool_choice.type" ? "tool choices" : "tools";
  return new AppError(
    "invalid_value",
    `Invalid value for '${param}': '${cutText(type, 64)}' ${kind} are not supported; only 'function' ${kind} are.`,
    { param },
  );
}

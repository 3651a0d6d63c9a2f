import { exceedsJsonDepth } from "../../json/check-json-depth.ts";

/** `JSON.parse` with its reviver's third argument, the source text of each primitive (Node 22+). */
type ParseWithSource = (
  text: string,
  reviver: (key: string, value: unknown, context: { source?: string }) => unknown,
) => unknown;

/**
 * A tool call's arguments or a tool result, as node-llama-cpp's chat wrappers take them: the
 * JSON value, which the templates render as JSON, where that says exactly what the client sent;
 * the text as it came otherwise. Kept as text:
 * - what is not JSON, or nests deeper than a request body may (node-llama-cpp copies and renders
 *   values recursively: 5000 levels inside a string, 10 KB, overflowed its stack);
 * - a JSON string ("shipped" would render without its quotes);
 * - JSON with a number that would not come back as written: a 64-bit id such as
 *   1234567890123456789 (rendered 1234567890123456800), 1e400 (rendered null), 10.10 (10.1).
 *   The model must see the id the tool returned, as an upstream model does.
 */
export function readToolJson(text: string): unknown {
  if (exceedsJsonDepth(text)) return text;
  let exact = true;
  let value: unknown;
  try {
    value = (JSON.parse as ParseWithSource)(text, (_key, parsed, context) => {
      if (typeof parsed === "number" && JSON.stringify(parsed) !== context.source) exact = false;
      return parsed;
    });
  } catch {
    return text;
  }
  return exact && typeof value !== "string" ? value : text;
}

/**
 * The shortest text a tool call's arguments or a tool result may be rendered as: the compact
 * JSON of the value {@link readToolJson} hands the template, or the text itself. Whitespace in
 * JSON (indentation) does not reach the prompt, so counting the text as sent would overstate a
 * prompt's tokens and refuse one that fits.
 */
export function shortestToolText(text: string): string {
  const value = readToolJson(text);
  return value === text ? text : (JSON.stringify(value) ?? text);
}

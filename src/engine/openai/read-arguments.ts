/**
 * A tool-call delta's arguments fragment. The protocol sends JSON text; a server that sends the
 * arguments as a JSON object instead has them written as that text, not dropped (the client would
 * get a call with empty arguments and no word of why).
 */
export function readArguments(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return JSON.stringify(value);
  return "";
}

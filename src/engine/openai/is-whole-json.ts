/** Whether a tool call's arguments are a whole JSON object or array, which no more text could extend. */
export function isWholeJson(text: string): boolean {
  if (text === "") return false;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null;
  } catch {
    return false;
  }
}

/**
 * A delta's text. Mostly a string; some servers (Mistral's reasoning models, some gateways) send
 * a list of typed parts: its `text` parts are the answer, its `thinking` parts go to `reasoning`.
 */
export function readDeltaContent(value: unknown, onReasoning: (text: string) => void): string {
  if (typeof value === "string") return value;
  if (!Array.isArray(value)) return "";
  let text = "";
  for (const part of value as unknown[]) {
    if (typeof part !== "object" || part === null) continue;
    const { type, text: partText, thinking } = part as { type?: unknown; text?: unknown; thinking?: unknown };
    if (type === "text" && typeof partText === "string") text += partText;
    else if (type === "thinking") readThinking(thinking, onReasoning);
  }
  return text;
}

/** A `thinking` part's text: a string, or a list of text parts. */
function readThinking(value: unknown, onReasoning: (text: string) => void): void {
  if (typeof value === "string") {
    onReasoning(value);
    return;
  }
  if (!Array.isArray(value)) return;
  for (const part of value as unknown[]) {
    const text = typeof part === "object" && part !== null ? (part as { text?: unknown }).text : undefined;
    if (typeof text === "string") onReasoning(text);
  }
}

/** What an upstream said about a failed request, as far as its body says anything. */
export interface UpstreamErrorBody {
  /** The upstream's message, shortened and with anything shaped like a credential removed. */
  message: string | undefined;
  type: string | undefined;
  code: string | undefined;
  param: string | undefined;
}

/** Longest upstream message passed on. */
const MAX_MESSAGE_LENGTH = 300;
/** API keys and bearer tokens that an upstream may echo in a message (`Incorrect API key: sk-...`). */
const CREDENTIAL = /\b(?:sk|pk|rk|ak|key)[-_][A-Za-z0-9_-]{6,}|\bBearer\s+\S+|\b[A-Za-z0-9_-]{32,}\b/g;

/**
 * Reads an upstream's error body: OpenAI's `{"error": {"message", "type", "code", "param"}}`, and
 * the shapes other compatible servers use (`{"error": "text"}`, `{"message"}`, `{"detail"}`, plain
 * text). Never throws; every field is `undefined` where the body does not say.
 */
export function readErrorBody(text: string): UpstreamErrorBody {
  const empty: UpstreamErrorBody = { message: undefined, type: undefined, code: undefined, param: undefined };
  const trimmed = text.trim();
  if (trimmed === "") return empty;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    // HTML error pages say nothing useful to a client.
    return trimmed.startsWith("<") ? empty : { ...empty, message: cleanMessage(trimmed) };
  }
  if (!isRecord(parsed))
    return typeof parsed === "string" ? { ...empty, message: cleanMessage(parsed) } : empty;
  const error = parsed.error;
  if (isRecord(error)) return readFields(error, readText(error.message));
  if (typeof error === "string") return { ...empty, message: cleanMessage(error) };
  // The fields at the top: vLLM's `{"object": "error", "message", "type", "code"}`, and the
  // error events of llama.cpp's streams (`{"code": 400, "message", "type"}`).
  return readFields(parsed, readText(parsed.message) ?? readText(parsed.detail));
}

function readFields(fields: Record<string, unknown>, message: string | undefined): UpstreamErrorBody {
  return {
    message,
    type: readString(fields.type),
    code: readString(fields.code) ?? (typeof fields.code === "number" ? String(fields.code) : undefined),
    param: readString(fields.param),
  };
}

function readText(value: unknown): string | undefined {
  if (typeof value === "string") return value.trim() === "" ? undefined : cleanMessage(value);
  // FastAPI's validation errors: `detail` is a list of `{loc, msg}`.
  if (Array.isArray(value)) {
    const messages = value.map(readValidationError).filter((message) => message !== undefined);
    return messages.length === 0 ? undefined : cleanMessage(messages.join("; "));
  }
  return undefined;
}

/**
 * One FastAPI validation error as `field: message`: the field is what says which part of the
 * request was refused (`["body", "stream_options"]` reads `stream_options`).
 */
function readValidationError(item: unknown): string | undefined {
  if (!isRecord(item) || typeof item.msg !== "string") return undefined;
  const location = Array.isArray(item.loc)
    ? item.loc
        .filter(
          (part, index) =>
            (typeof part === "string" || typeof part === "number") && !(index === 0 && part === "body"),
        )
        .join(".")
    : "";
  return location === "" ? item.msg : `${location}: ${item.msg}`;
}

function readString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function cleanMessage(message: string): string {
  const redacted = message.replace(CREDENTIAL, "[redacted]").replace(/\s+/g, " ").trim();
  return redacted.length <= MAX_MESSAGE_LENGTH ? redacted : `${redacted.slice(0, MAX_MESSAGE_LENGTH - 1)}…`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

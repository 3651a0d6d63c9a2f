import { cutText } from "../../errors/cut-text.ts";
import { redactUpstreamText } from "./redact-upstream-text.ts";

/**
 * What an upstream said about a failed request, as far as its body says anything. Every field is
 * free of the endpoint's secrets and of anything shaped like a credential (redact-upstream-text.ts).
 */
export interface UpstreamErrorBody {
  /** The upstream's message, shortened. */
  message: string | undefined;
  type: string | undefined;
  code: string | undefined;
  param: string | undefined;
}

/** Longest upstream message (or other field) passed on. */
const MAX_MESSAGE_LENGTH = 300;

/**
 * Reads an upstream's error body: OpenAI's `{"error": {"message", "type", "code", "param"}}`, and
 * the shapes other compatible servers use (`{"error": "text"}`, `{"message"}`, `{"detail"}`, plain
 * text). Never throws; every field is `undefined` where the body does not say. `secrets`: the
 * endpoint's (see create-upstream-endpoint.ts), removed from every field, since an upstream may
 * repeat in its errors the credentials it was sent.
 */
export function readErrorBody(text: string, secrets: readonly string[]): UpstreamErrorBody {
  const raw = readRawErrorBody(text);
  return {
    message: cleanText(raw.message, secrets),
    type: cleanText(raw.type, secrets),
    code: cleanText(raw.code, secrets),
    param: cleanText(raw.param, secrets),
  };
}

/** The body's fields as the upstream wrote them. */
function readRawErrorBody(text: string): UpstreamErrorBody {
  const empty: UpstreamErrorBody = { message: undefined, type: undefined, code: undefined, param: undefined };
  const trimmed = text.trim();
  if (trimmed === "") return empty;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    // HTML error pages say nothing useful to a client.
    return trimmed.startsWith("<") ? empty : { ...empty, message: trimmed };
  }
  if (!isRecord(parsed)) return typeof parsed === "string" ? { ...empty, message: parsed } : empty;
  const error = parsed.error;
  if (isRecord(error)) return readFields(error, readText(error.message));
  if (typeof error === "string") return { ...empty, message: error };
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
  if (typeof value === "string") return value.trim() === "" ? undefined : value;
  // FastAPI's validation errors: `detail` is a list of `{loc, msg}`.
  if (Array.isArray(value)) {
    const messages = value.map(readValidationError).filter((message) => message !== undefined);
    return messages.length === 0 ? undefined : messages.join("; ");
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

/**
 * A field as it may be passed on: secrets removed first, on the whole text (shortening could
 * otherwise cut one and leave its start), then one line, shortened; `undefined` when blank.
 */
function cleanText(text: string | undefined, secrets: readonly string[]): string | undefined {
  if (text === undefined) return undefined;
  const cleaned = redactUpstreamText(text, secrets).replace(/\s+/g, " ").trim();
  if (cleaned === "") return undefined;
  return cleaned.length <= MAX_MESSAGE_LENGTH ? cleaned : `${cutText(cleaned, MAX_MESSAGE_LENGTH - 1)}…`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

import { showControlCharacters } from "../../admin/show-control-characters.ts";
import { cutText } from "../../errors/cut-text.ts";
import { readLeadingFields } from "./read-leading-fields.ts";
import { dropCutSecret, REDACTED, redactUpstreamText } from "./redact-upstream-text.ts";

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
  /**
   * The upstream's moderation flagged the request's input: OpenRouter answers 403 with
   * `metadata.flagged_input` (and `reasons`). A refusal of this request, not of Tollgate's key.
   */
  flagged?: boolean;
  /**
   * Why the body could not be read, where it looked like JSON and did not parse and no message
   * could be read from its start (or, for a stream, how the upstream broke the protocol:
   * create-answer-reader.ts): Tollgate's words, completing "The upstream server rejected the
   * request (HTTP 400); ...", which log lines may quote. `undefined` otherwise.
   */
  unreadable?: string | undefined;
}

/** How an upstream's error body is read. */
export interface ReadErrorBodyOptions {
  /**
   * The body was cut at the bound it is read to: a JSON body then does not parse, and only its
   * start is read. Default false.
   */
  cut?: boolean | undefined;
  /**
   * The names of the endpoint's own server (list-endpoint-names.ts), replaced in every field by
   * "the upstream server": the fields may reach a client. Default none.
   */
  names?: readonly string[] | undefined;
}

/** Most of an error's text that is read (the bound of an error body, read-upstream-body.ts). */
const MAX_READ_LENGTH = 64 * 1024;

/** Longest upstream message (or other field) passed on. */
const MAX_MESSAGE_LENGTH = 300;

/**
 * Reads an upstream's error body: OpenAI's `{"error": {"message", "type", "code", "param"}}`, and
 * the shapes other compatible servers use (`{"error": "text"}`, `{"message"}`, `{"detail"}`, plain
 * text). Never throws; every field is `undefined` where the body does not say. `secrets`: the
 * endpoint's (see create-upstream-endpoint.ts), removed from every field, since an upstream may
 * repeat in its errors the credentials it was sent.
 *
 * A body that looks like JSON and does not parse (cut at its bound, or malformed) is never passed
 * on as it is: it may hold anything (a stack trace, file paths, the URL of the upstream's own
 * database). Only the fields it begins with are read (read-leading-fields.ts); a message it was
 * cut inside of is passed on cut. Where no message can be read, `unreadable` says why.
 */
export function readErrorBody(
  text: string,
  secrets: readonly string[],
  options: ReadErrorBodyOptions = {},
): UpstreamErrorBody {
  // An error event of a stream may be as long as a whole answer (32 MiB): read no more of it
  // than of an error body (64 KiB), which parsing, redacting and the leading fields go through.
  const bounded =
    text.length > MAX_READ_LENGTH ? dropCutSecret(text.slice(0, MAX_READ_LENGTH), secrets) : text;
  const raw = readRawErrorBody(bounded, options.cut === true || bounded !== text);
  const names = options.names ?? [];
  const clean = (field: string | undefined) => cleanText(field, secrets, names);
  const body: UpstreamErrorBody = {
    message: clean(raw.message),
    type: clean(raw.type),
    code: clean(raw.code),
    param: clean(raw.param),
  };
  if (raw.unreadable !== undefined) body.unreadable = raw.unreadable;
  if (raw.flagged === true) body.flagged = true;
  // Read as the upstream wrote it: cleaned, its lines are run together.
  if (raw.message !== undefined && holdsStackTrace(raw.message)) {
    // Passed on, it told every client the upstream's file paths, versions and hosts (SPEC §4:
    // never a stack trace), where the same text in a 500's body was never shown.
    body.message = undefined;
    body.unreadable = "its error message holds a stack trace, which is not passed on";
    return body;
  }
  if (raw.messageCut === true && body.message !== undefined) {
    // Nothing but redactions left (a message of one long token, cut): it says nothing.
    if (/^[\s\p{P}]*$/u.test(body.message.replaceAll(REDACTED, ""))) {
      body.message = undefined;
      body.unreadable = "its error message is too long to read";
    } else if (!body.message.endsWith("…")) body.message += "…";
  }
  return body;
}

/**
 * Lines of a stack trace, by language: Python's header, V8's and Java's `at` frames (also where
 * the line breaks came escaped, `\n`), .NET's (`at X() in PATH:line N`), Go's goroutine header,
 * Rust's panic, PHP's numbered frames and its `Stack trace:`, Ruby's `PATH.rb:N:in`.
 */
const STACK_TRACE_LINE = new RegExp(
  [
    String.raw`Traceback \(most recent call last\)`,
    String.raw`(?:^|\\n)[ \t]+at \S.*?[(\s/\\][^()\s]+:\d+(?::\d+)?\)?[ \t]*(?:$|\\n)`,
    String.raw`^[ \t]+at \S.* in \S.*:line \d+`,
    String.raw`^goroutine \d+ \[`,
    String.raw`panicked at \S+\.rs:\d+`,
    String.raw`^#\d+ \S+\(\d+\): `,
    String.raw`Stack trace:\s*(?:\\n)?#0 `,
    String.raw`\S+\.rb:\d+:in [\x60'"]`,
  ].join("|"),
  "m",
);

/** A frame of a Python traceback: one alone may be a parse error quoting code, two are a trace. */
const PYTHON_FRAME = /\bFile "[^"\n]+", line \d+/g;

/** Whether an upstream's error message holds a stack trace. */
export function holdsStackTrace(message: string): boolean {
  return STACK_TRACE_LINE.test(message) || (message.match(PYTHON_FRAME)?.length ?? 0) >= 2;
}

/** The body's fields as the upstream wrote them; `messageCut`: the message is the start of a longer one. */
function readRawErrorBody(text: string, cut: boolean): UpstreamErrorBody & { messageCut?: boolean } {
  const empty: UpstreamErrorBody = { message: undefined, type: undefined, code: undefined, param: undefined };
  const trimmed = text.trim();
  if (trimmed === "") return empty;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    // HTML error pages say nothing useful to a client.
    if (trimmed.startsWith("<")) return empty;
    if (trimmed.startsWith("{") || trimmed.startsWith("[")) return readBrokenJson(trimmed, cut);
    return { ...empty, message: trimmed };
  }
  if (!isRecord(parsed)) return typeof parsed === "string" ? { ...empty, message: parsed } : empty;
  const error = parsed.error;
  if (isRecord(error)) return readFields(error, readText(error.message));
  if (typeof error === "string") return { ...empty, message: error };
  // The fields at the top: vLLM's `{"object": "error", "message", "type", "code"}`, and the
  // error events of llama.cpp's streams (`{"code": 400, "message", "type"}`).
  return readFields(parsed, readText(parsed.message) ?? readText(parsed.detail));
}

/**
 * A body that looks like JSON and does not parse: what its first fields say
 * (read-leading-fields.ts), else only why it could not be read.
 */
function readBrokenJson(text: string, cut: boolean): UpstreamErrorBody & { messageCut?: boolean } {
  const { fields, cutField } = readLeadingFields(text);
  const messageKey =
    fields.message !== undefined ? "message" : fields.detail !== undefined ? "detail" : undefined;
  const message = messageKey === undefined ? undefined : readText(fields[messageKey]);
  if (message === undefined || messageKey === undefined)
    return {
      message: undefined,
      type: undefined,
      code: undefined,
      param: undefined,
      unreadable: cut ? "its error body is too long to read" : "its error body is not valid JSON",
    };
  return {
    ...readFields(fields, message),
    messageCut: cutField === messageKey,
  };
}

function readFields(fields: Record<string, unknown>, message: string | undefined): UpstreamErrorBody {
  const read: UpstreamErrorBody = {
    message,
    type: readString(fields.type),
    code: readString(fields.code) ?? (typeof fields.code === "number" ? String(fields.code) : undefined),
    param: readString(fields.param),
  };
  if (isRecord(fields.metadata) && "flagged_input" in fields.metadata) read.flagged = true;
  return read;
}

function readText(value: unknown): string | undefined {
  if (typeof value === "string") return value.trim() === "" ? undefined : value;
  // FastAPI's validation errors: `detail` is a list of `{loc, msg}`.
  if (Array.isArray(value)) {
    const messages = value.map(readValidationError).filter((message) => message !== undefined);
    return messages.length === 0 ? undefined : messages.join("; ");
  }
  // Mistral's `{"message": {"detail": [...]}}`: the message an object holding them (one level:
  // what it holds is read as a text or a list, not as another such object).
  if (isRecord(value) && !isRecord(value.detail)) return readText(value.detail);
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
 * otherwise cut one and leave its start), then one line, its control characters (but for
 * whitespace) written as `\u001b` and the like, shortened; `undefined` when blank.
 */
function cleanText(
  text: string | undefined,
  secrets: readonly string[],
  names: readonly string[],
): string | undefined {
  if (text === undefined) return undefined;
  const cleaned = redactUpstreamText(text, secrets, names).replace(/\s+/g, " ").trim();
  if (cleaned === "") return undefined;
  const shortened =
    cleaned.length <= MAX_MESSAGE_LENGTH ? cleaned : `${cutText(cleaned, MAX_MESSAGE_LENGTH - 1)}…`;
  // Control characters written as escapes (an SDK or a CLI prints the message to a terminal, where
  // an upstream's escape sequences would recolour or clear it), once shortened: never cut in two.
  return showControlCharacters(shortened);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

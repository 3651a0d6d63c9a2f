import type { ServerSentEvent } from "./create-sse-parser.ts";
import type { UpstreamCall } from "./start-upstream-call.ts";
import { AttemptStopped } from "./upstream-attempt.ts";

/** Longest upstream error body read, in bytes of text: enough for any message, bounded against abuse. */
export const MAX_ERROR_BODY_LENGTH = 64 * 1024;
/**
 * Longest answer read, in characters: a whole JSON answer (an upstream that ignored `stream`),
 * one SSE event, or the text and tool arguments of a streamed answer. Far above any completion;
 * an upstream that never ends its line, its event or its answer is cut here instead of being read
 * into memory until the process runs out.
 */
export const MAX_ANSWER_LENGTH = 32 * 1024 * 1024;
export const MAX_ANSWER_TEXT = `${MAX_ANSWER_LENGTH / (1024 * 1024)} MiB`;

/**
 * The body as text, up to `maxLength`: past that the call is aborted and the text cut there.
 * `onPiece` runs for each piece taken.
 */
export async function readText(
  call: UpstreamCall,
  maxLength: number,
  onPiece: () => void,
): Promise<{ text: string; cut: boolean }> {
  let text = "";
  for (let piece = await call.read(); piece !== undefined; piece = await call.read()) {
    onPiece();
    text += piece;
    if (text.length > maxLength) {
      call.abort(new AttemptStopped("body too long"));
      return { text: text.slice(0, maxLength), cut: true };
    }
  }
  return { text, cut: false };
}

/**
 * The body's text so far with `text` added, while it may still be a bare JSON answer: to the
 * error body's bound whatever it holds, and past it only if it begins with `{` (then bounded with
 * the answers, in the caller). `undefined` once it is neither.
 */
export function keepUnparsed(unparsed: string, text: string): string | undefined {
  const kept = unparsed + text;
  if (kept.length <= MAX_ERROR_BODY_LENGTH) return kept;
  // Looked at once, where it grows past the bound: what is kept after that began as JSON.
  if (unparsed.length <= MAX_ERROR_BODY_LENGTH && !beginsAsJson(kept)) return undefined;
  return kept;
}

/** Whether an event the body ended in is a piece of one: data that is neither JSON nor `[DONE]`. */
export function isCutEvent(event: ServerSentEvent): boolean {
  if (event.event === "error" || event.data === "[DONE]") return false;
  try {
    JSON.parse(event.data);
    return false;
  } catch {
    return true;
  }
}

/** Whether a body begins as a JSON object does, after white space (a byte order mark included). */
export function beginsAsJson(text: string): boolean {
  return text.trimStart().startsWith("{");
}

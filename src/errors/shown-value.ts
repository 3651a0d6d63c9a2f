import { cutText } from "./cut-text.ts";

/** Longest client text an error message repeats; the rest is cut (a request may send megabytes). */
const MAX_SHOWN_VALUE_CHARS = 256;

/**
 * Client text as an error message repeats it, cut at {@link MAX_SHOWN_VALUE_CHARS}: an 8 MB
 * model name was answered with an 8 MB 404.
 */
export function shownValue(text: unknown): string {
  const value = String(text);
  return value.length > MAX_SHOWN_VALUE_CHARS ? `${cutText(value, MAX_SHOWN_VALUE_CHARS)}...` : value;
}

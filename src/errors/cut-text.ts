/**
 * The start of `text`, at most `maxUnits` UTF-16 code units long, for a message, a log line or
 * the CLI: a cut that would split a surrogate pair (an emoji) drops its first half too. Half a
 * pair cannot be written as UTF-8: clients print it as U+FFFD or fail to encode the message.
 */
export function cutText(text: string, maxUnits: number): string {
  if (text.length <= maxUnits) return text;
  const end = Math.max(0, maxUnits);
  return isHighSurrogate(text.charCodeAt(end - 1)) ? text.slice(0, end - 1) : text.slice(0, end);
}

/**
 * `text` as a message shows what someone typed: whole when it has at most `maxUnits` UTF-16 code
 * units, else its start and "...", `maxUnits` long in all (a megabyte argument is not sent back).
 */
export function shortenText(text: string, maxUnits = 80): string {
  return text.length > maxUnits ? `${cutText(text, maxUnits - 3)}...` : text;
}

/**
 * The end of `text`, at most `maxUnits` UTF-16 code units long: as {@link cutText}, from the
 * other side, so a cut that would split a surrogate pair drops its second half too.
 */
export function cutTextKeepingEnd(text: string, maxUnits: number): string {
  if (text.length <= maxUnits) return text;
  const start = text.length - Math.max(0, maxUnits);
  return isLowSurrogate(text.charCodeAt(start)) ? text.slice(start + 1) : text.slice(start);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

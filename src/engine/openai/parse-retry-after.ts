/** Longest pause an upstream may ask for that is still read as a pause (a day). */
const MAX_RETRY_AFTER_MS = 86_400_000;

/**
 * How long an upstream asks to wait before the next request, in milliseconds: `retry-after-ms`
 * (OpenAI, Azure) first, else `retry-after` as seconds or as an HTTP date. `undefined` when
 * neither header is there or readable.
 */
export function parseRetryAfter(
  headers: Record<string, string | string[] | undefined>,
  now: number = Date.now(),
): number | undefined {
  const milliseconds = readNumber(firstValue(headers["retry-after-ms"]));
  if (milliseconds !== undefined) return clamp(milliseconds);
  const value = firstValue(headers["retry-after"])?.trim();
  if (value === undefined || value === "") return undefined;
  const seconds = readNumber(value);
  if (seconds !== undefined) return clamp(seconds * 1000);
  // An HTTP date names its weekday and month; anything else ("-3") is no date.
  if (!/[a-z]/i.test(value)) return undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : clamp(date - now);
}

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function readNumber(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d+(\.\d+)?\s*$/.test(value)) return undefined;
  return Number(value);
}

function clamp(milliseconds: number): number {
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.ceil(milliseconds)));
}

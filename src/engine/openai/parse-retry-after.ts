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
  const date = parseHttpDate(value, now);
  return date === undefined ? undefined : clamp(date - now);
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY = "(?:mon|tue|wed|thu|fri|sat|sun)";
const LONG_DAY = "(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)";
const MONTH = "(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)";
const TIME = "(\\d\\d):(\\d\\d):(\\d\\d)";
/** `Sun, 06 Nov 1994 08:49:37 GMT` (the IMF-fixdate of RFC 9110). */
const IMF_FIXDATE = new RegExp(`^${DAY}, +(\\d\\d?) ${MONTH} (\\d{4}) ${TIME} (?:GMT|UTC)$`, "i");
/** `Sunday, 06-Nov-94 08:49:37 GMT` (RFC 850's, obsolete). */
const RFC_850_DATE = new RegExp(`^${LONG_DAY}, +(\\d\\d?)-${MONTH}-(\\d\\d) ${TIME} (?:GMT|UTC)$`, "i");
/** `Sun Nov  6 08:49:37 1994` (C's asctime, in GMT by definition). */
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} +(\\d\\d?) ${TIME} (\\d{4})$`, "i");

/**
 * An HTTP date (RFC 9110 section 5.6.7, its three forms), in milliseconds since the epoch; every
 * form is in GMT, whatever the server's time zone. `undefined` for anything else: `Date.parse`
 * would read almost any text as some date ("x 32" as the year 2032), and an endpoint would then
 * rest for a day on a garbled header.
 */
function parseHttpDate(value: string, now: number): number | undefined {
  let day: string | undefined;
  let month: string | undefined;
  let year: number;
  let time: (string | undefined)[];
  let match = IMF_FIXDATE.exec(value);
  if (match !== null) {
    [, day, month] = match;
    year = Number(match[3]);
    time = match.slice(4, 7);
  } else if ((match = RFC_850_DATE.exec(value)) !== null) {
    [, day, month] = match;
    // A two-digit year more than 50 years ahead is of the century before (RFC 9110).
    year = 2000 + Number(match[3]);
    if (year > new Date(now).getUTCFullYear() + 50) year -= 100;
    time = match.slice(4, 7);
  } else if ((match = ASCTIME_DATE.exec(value)) !== null) {
    [, month, day] = match;
    year = Number(match[6]);
    time = match.slice(3, 6);
  } else {
    return undefined;
  }
  const [hours, minutes, seconds] = time.map(Number) as [number, number, number];
  const monthIndex = MONTHS.indexOf(month?.toLowerCase() ?? "");
  const dayOfMonth = Number(day);
  if (hours > 23 || minutes > 59 || seconds > 59) return undefined;
  const date = new Date(Date.UTC(year, monthIndex, dayOfMonth, hours, minutes, seconds));
  // Date.UTC rolls an impossible day over (31 Feb is 3 Mar): such a date is no date.
  if (date.getUTCMonth() !== monthIndex || date.getUTCDate() !== dayOfMonth) return undefined;
  return date.getTime();
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

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
  const parts = readDateParts(value, now);
  if (parts === undefined) return undefined;
  const { year, month, day, hours, minutes, seconds } = parts;
  const monthIndex = MONTHS.indexOf(month.toLowerCase());
  if (hours > 23 || minutes > 59 || seconds > 59) return undefined;
  const date = new Date(Date.UTC(year, monthIndex, day, hours, minutes, seconds));
  // Date.UTC rolls an impossible day over (31 Feb is 3 Mar): such a date is no date.
  if (date.getUTCMonth() !== monthIndex || date.getUTCDate() !== day) return undefined;
  return date.getTime();
}

interface DateParts {
  year: number;
  month: string;
  day: number;
  hours: number;
  minutes: number;
  seconds: number;
}

/** The fields of whichever of the three forms `value` has. */
function readDateParts(value: string, now: number): DateParts | undefined {
  const time = (match: RegExpExecArray, first: number) => ({
    hours: Number(match[first]),
    minutes: Number(match[first + 1]),
    seconds: Number(match[first + 2]),
  });
  const fixdate = IMF_FIXDATE.exec(value);
  if (fixdate !== null)
    return {
      year: Number(fixdate[3]),
      month: String(fixdate[2]),
      day: Number(fixdate[1]),
      ...time(fixdate, 4),
    };
  const rfc850 = RFC_850_DATE.exec(value);
  if (rfc850 !== null) {
    // A two-digit year more than 50 years ahead is of the century before (RFC 9110).
    let year = 2000 + Number(rfc850[3]);
    if (year > new Date(now).getUTCFullYear() + 50) year -= 100;
    return { year, month: String(rfc850[2]), day: Number(rfc850[1]), ...time(rfc850, 4) };
  }
  const asctime = ASCTIME_DATE.exec(value);
  if (asctime !== null)
    return {
      year: Number(asctime[6]),
      month: String(asctime[1]),
      day: Number(asctime[2]),
      ...time(asctime, 3),
    };
  return undefined;
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

/**
 * Longest pause an upstream's `retry-after` keeps its endpoint resting (ten minutes): then one
 * request finds out whether it is back. A day, as it was, let one odd header (or a daily quota
 * the operator then raised) take a model out until the next day or a restart.
 */
export const MAX_RETRY_AFTER_MS = 600_000;

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
const DAY_NAME = "(?:mon|tue|wed|thu|fri|sat|sun)";
const LONG_DAY_NAME = "(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)";
const MONTH = `(?<month>${MONTHS.join("|")})`;
const DAY = "(?<day>\\d\\d?)";
const TIME = "(?<hours>\\d\\d):(?<minutes>\\d\\d):(?<seconds>\\d\\d)";
/** RFC 9110's three forms of HTTP date, each read into the same named groups. */
const HTTP_DATE_FORMS = [
  // `Sun, 06 Nov 1994 08:49:37 GMT` (the IMF-fixdate)
  new RegExp(`^${DAY_NAME}, +${DAY} ${MONTH} (?<year>\\d{4}) ${TIME} (?:GMT|UTC)$`, "i"),
  // `Sunday, 06-Nov-94 08:49:37 GMT` (RFC 850's, obsolete)
  new RegExp(`^${LONG_DAY_NAME}, +${DAY}-${MONTH}-(?<year>\\d\\d) ${TIME} (?:GMT|UTC)$`, "i"),
  // `Sun Nov  6 08:49:37 1994` (C's asctime, in GMT by definition)
  new RegExp(`^${DAY_NAME} ${MONTH} +${DAY} ${TIME} (?<year>\\d{4})$`, "i"),
];

/**
 * An HTTP date (RFC 9110 section 5.6.7, its three forms), in milliseconds since the epoch; every
 * form is in GMT, whatever the server's time zone. `undefined` for anything else: `Date.parse`
 * would read almost any text as some date ("x 32" as the year 2032), and an endpoint would then
 * rest for a day on a garbled header.
 */
function parseHttpDate(value: string, now: number): number | undefined {
  const groups = HTTP_DATE_FORMS.map((form) => form.exec(value)?.groups).find((found) => found !== undefined);
  if (groups === undefined) return undefined;
  // Every form names every group: a value that is not there reads as NaN, which no date matches.
  const [day, hours, minutes, seconds] = ["day", "hours", "minutes", "seconds"].map((name) =>
    Number(groups[name]),
  ) as [number, number, number, number];
  let year = Number(groups.year);
  // A two-digit year (RFC 850's) more than 50 years ahead is of the century before (RFC 9110).
  if (groups.year?.length === 2) {
    year += 2000;
    if (year > new Date(now).getUTCFullYear() + 50) year -= 100;
  }
  const monthIndex = MONTHS.indexOf(groups.month?.toLowerCase() ?? "");
  if (hours > 23 || minutes > 59 || seconds > 59) return undefined;
  const date = new Date(Date.UTC(year, monthIndex, day, hours, minutes, seconds));
  // Date.UTC rolls an impossible day over (31 Feb is 3 Mar): such a date is no date.
  if (date.getUTCMonth() !== monthIndex || date.getUTCDate() !== day) return undefined;
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

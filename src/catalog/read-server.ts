import type { Config } from "./catalog.ts";
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_HOST, DEFAULT_PORT } from "./config-defaults.ts";
import type { ConfigPath } from "./config-error.ts";
import {
  type ConfigIssues,
  checkKnownKeys,
  describeValue,
  isAbsent,
  readInteger,
  readMapping,
  readString,
} from "./config-fields.ts";
import { parseByteSize } from "./parse-byte-size.ts";
import type { EnvironmentOverrides } from "./read-environment-overrides.ts";

const SERVER_KEYS = ["host", "port", "body_limit"] as const;
const PORT_RANGE = { min: 0, max: 65_535 } as const;

/** `server:` left out. */
export const DEFAULT_SERVER: Readonly<Config["server"]> = {
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  bodyLimitBytes: DEFAULT_BODY_LIMIT_BYTES,
};

/**
 * `server:`, with `HOST` and `PORT` in place of the file's host and port where they are set, and
 * defaults for what is left out; `undefined` when any of it is wrong (the issues say what).
 */
export function readServer(
  issues: ConfigIssues,
  value: unknown,
  overrides: EnvironmentOverrides,
): Config["server"] | undefined {
  const before = issues.count;
  const server =
    readMapping(issues, ["server"], value, "{ host: 127.0.0.1, port: 8080, body_limit: 8mb }") ?? {};
  checkKnownKeys(issues, ["server"], server, SERVER_KEYS);
  const host =
    overrides.host ?? readString(issues, ["server", "host"], server.host, { example: '"127.0.0.1"' });
  const port =
    overrides.port === undefined
      ? readInteger(issues, ["server", "port"], server.port, PORT_RANGE)
      : readPortOverride(issues, overrides.port);
  const bodyLimitBytes = readBodyLimit(issues, ["server", "body_limit"], server.body_limit);
  if (issues.count > before) return undefined;
  return {
    host: host ?? DEFAULT_SERVER.host,
    port: port ?? DEFAULT_SERVER.port,
    bodyLimitBytes: bodyLimitBytes ?? DEFAULT_SERVER.bodyLimitBytes,
  };
}

function readPortOverride(issues: ConfigIssues, value: string): number | undefined {
  const port = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (Number.isSafeInteger(port) && port >= PORT_RANGE.min && port <= PORT_RANGE.max) return port;
  issues.addForEnvironment("PORT", `must be an integer from 0 to 65535 (got ${describeValue(value)})`);
  return undefined;
}

/**
 * The largest `body_limit`: a body is read whole into one string and parsed, and V8's strings
 * end at 512 MiB (a body_limit of 1gb was taken, and a 600 MiB body answered 500). No chat
 * request comes near it.
 */
export const MAX_BODY_LIMIT_BYTES = 256 * 1024 * 1024;

function readBodyLimit(issues: ConfigIssues, path: ConfigPath, value: unknown): number | undefined {
  if (isAbsent(value)) return undefined;
  const bytes = typeof value === "string" || typeof value === "number" ? parseByteSize(value) : undefined;
  if (bytes === undefined) {
    issues.add(path, `must be a size such as 8mb, 512kb or a number of bytes (got ${describeValue(value)})`);
  } else if (bytes > MAX_BODY_LIMIT_BYTES) {
    issues.add(
      path,
      `must be at most 256mb (got ${describeValue(value)}): a body is read and parsed whole, in memory`,
    );
    return undefined;
  }
  return bytes;
}

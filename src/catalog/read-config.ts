/**
 * Turns the parsed YAML tree (already known to come from one file, or `{}` for the built-in
 * default) into a validated {@link LoadedConfig}: environment overrides first, then `${VAR}`
 * substitution, then every field with its default. Returns every problem found; the caller
 * places them at lines of the file and throws.
 *
 * Top-level keys starting with `x-` are ignored (somewhere to define YAML anchors).
 *
 * Relative paths: a SQLite path or llama model path written in the file is resolved against the
 * file's folder, so every command finds the same store and models wherever it runs from; the
 * default database and `TOLLGATE_DATABASE_URL` are resolved against the working folder.
 */
import { resolve } from "node:path";
import { type Config, LOG_LEVELS, type LogLevel } from "./catalog.ts";
import { DEFAULT_CHARGE_JOURNAL_DIR, DEFAULT_DATABASE } from "./config-defaults.ts";
import type { ConfigPath } from "./config-error.ts";
import {
  ConfigIssues,
  type ConfigMapping,
  checkKnownKeys,
  describeBearerKeyProblem,
  describeHeaderValueProblem,
  describeValue,
  isAbsent,
  isMapping,
  readBoolean,
  readChoice,
  readHeaderValue,
  readString,
} from "./config-fields.ts";
import { createDefaultCatalog } from "./default-catalog.ts";
import { type EnvironmentOverrides, readEnvironmentOverrides } from "./read-environment-overrides.ts";
import { readModels } from "./read-models.ts";
import { DEFAULT_SERVER, readServer } from "./read-server.ts";
import { resolveDatabaseUrl } from "./resolve-database-url.ts";
import { substituteVariables } from "./substitute-variables.ts";

/**
 * The configuration as loaded: {@link Config} plus the fields the shared type does not have yet.
 * `metricsKey`: the key `/metrics` requires (SPEC §11); `undefined` means `/metrics` is open.
 */
export interface LoadedConfig extends Config {
  metricsKey: string | undefined;
}

const TOP_LEVEL_KEYS = [
  "server",
  "database",
  "redis",
  "admin_key",
  "metrics_key",
  "log_prompts",
  "log_level",
  "charge_journal_dir",
  "models",
] as const;
/** Fields where `${VAR}` of an unset variable means "not set" rather than a problem. */
const MAY_BE_UNSET = new Set(["admin_key", "metrics_key"]);

/**
 * The settings only `serve` uses. A command reads them as the server would, but nothing in them
 * stops it: `port: "${PORT}"`, as the README suggests, stopped every command run in a shell
 * without PORT.
 */
const SERVE_ONLY_KEYS = new Set(["server", "log_level", "log_prompts"]);

/**
 * Settings read from the environment only, written in the file: said so (they were "unknown
 * key; remove it", with no word of the variable that sets them).
 */
const ENVIRONMENT_ONLY_HINTS = Object.fromEntries(
  Object.entries({
    models_dir: "TOLLGATE_MODELS_DIR",
    replica_id: "TOLLGATE_REPLICA_ID",
    redis_prefix: "TOLLGATE_REDIS_PREFIX",
    redis_failure_policy: "TOLLGATE_REDIS_FAILURE_POLICY",
    hf_endpoint: "TOLLGATE_HF_ENDPOINT",
  }).map(([key, variable]) => [
    key,
    `is set by the environment variable ${variable}, not in the config file; remove it here and set ${variable} instead`,
  ]),
);

export interface ReadConfigOptions {
  /** The parsed file (`{}` for the built-in default). */
  raw: unknown;
  env: NodeJS.ProcessEnv;
  /** Absolute working folder. */
  cwd: string;
  /** Absolute folder of the config file (the working folder for the built-in default). */
  configFolder: string;
  /** The file, or `undefined` for the built-in default. */
  source: string | undefined;
  /** `created` for models that do not set it (Unix seconds). */
  created: number;
  /** Who reads the config: see {@link ConfigPurpose}. Default `"serve"`. */
  purpose?: ConfigPurpose;
}

/**
 * `serve`: everything must be there. `command`: a CLI command that neither serves nor calls an
 * upstream (accounts, keys, usage, audit, models): upstream keys and headers whose variables are
 * not set are read as empty, `HOST` and `PORT` are not read, and nothing in `server`,
 * `log_level` or `log_prompts` stops it, so an operator's shell needs none of the server's
 * secrets or settings.
 */
export type ConfigPurpose = "serve" | "command";

/** Whether `path` is an upstream endpoint's `api_key` or one of its `headers`. */
function isUpstreamSecret(path: ConfigPath): boolean {
  return (
    path[0] === "models" &&
    path[2] === "engine" &&
    path[3] === "endpoints" &&
    (path[5] === "api_key" || path[5] === "headers")
  );
}

export type ReadConfigResult = { ok: true; config: LoadedConfig } | { ok: false; issues: ConfigIssues };

export function readConfig(options: ReadConfigOptions): ReadConfigResult {
  const issues = new ConfigIssues();
  const overrides = readEnvironmentOverrides(options.env, options.purpose ?? "serve");
  if (!isMapping(options.raw)) {
    issues.add(
      [],
      `the file must be a YAML mapping with keys such as server, database and models (got ${describeValue(options.raw)})`,
    );
    return { ok: false, issues };
  }
  // Top-level keys starting with "x-" are ignored: a place for YAML anchors, as in Compose files.
  const ownKeys = Object.fromEntries(Object.entries(options.raw).filter(([key]) => !key.startsWith("x-")));
  checkKnownKeys(issues, [], ownKeys, TOP_LEVEL_KEYS, {
    host: "belongs under server; write server: { host: ... }",
    port: "belongs under server; write server: { port: ... }",
    body_limit: "belongs under server; write server: { body_limit: ... }",
    database_url: "write database: instead",
    redis_url: "write redis: instead",
    ...ENVIRONMENT_ONLY_HINTS,
  });
  const replaced = listReplacedValues(ownKeys, overrides, options);
  // Only the known keys: an unknown one is refused as such, not for a variable it names as well.
  const knownKeys = Object.fromEntries(
    Object.entries(ownKeys).filter(([key]) => (TOP_LEVEL_KEYS as readonly string[]).includes(key)),
  );
  const raw = substituteVariables(removeOverriddenValues(knownKeys, overrides), {
    env: options.env,
    issues,
    // A key the reference is only part of (`"acme-admin-${SECRET}"`) would be the rest, a key
    // anyone could guess: its variable must be set.
    mayBeUnset: (path: ConfigPath, whole: boolean) =>
      (whole && path.length === 1 && MAY_BE_UNSET.has(String(path[0]))) ||
      (options.purpose === "command" && (isUpstreamSecret(path) || SERVE_ONLY_KEYS.has(String(path[0])))),
  });
  const tree: ConfigMapping = isMapping(raw) ? raw : {};
  // A command's issues with what only `serve` uses are dropped (see SERVE_ONLY_KEYS).
  const serveIssues = options.purpose === "command" ? new ConfigIssues() : issues;

  const server =
    readServer(serveIssues, tree.server, overrides) ?? (serveIssues === issues ? undefined : DEFAULT_SERVER);
  const database = readDatabase(issues, tree.database, overrides, options);
  const redis = readRedis(issues, tree.redis, overrides);
  if (overrides.adminKey !== undefined) {
    const problem =
      describeHeaderValueProblem(overrides.adminKey) ?? describeBearerKeyProblem(overrides.adminKey);
    if (problem !== undefined) issues.addForEnvironment("TOLLGATE_ADMIN_KEY", problem);
  }
  const adminKey =
    overrides.adminKey ??
    readOptionalSecret(issues, ["admin_key"], tree.admin_key, `"\${TOLLGATE_ADMIN_KEY}"`);
  const metricsKey = readOptionalSecret(
    issues,
    ["metrics_key"],
    tree.metrics_key,
    `"\${TOLLGATE_METRICS_KEY}"`,
  );
  // `${VAR}` of a variable that is not set leaves the key unset, as written: said at start, since
  // an operator who forgot the variable would not otherwise learn that /metrics is open.
  const unsetKeys = [
    ...(overrides.adminKey === undefined && adminKey === undefined && isReference(ownKeys.admin_key)
      ? [
          `admin_key is ${String(ownKeys.admin_key)}, which is not set: the admin API takes only the stored admin keys`,
        ]
      : []),
    ...(metricsKey === undefined && isReference(ownKeys.metrics_key)
      ? [`metrics_key is ${String(ownKeys.metrics_key)}, which is not set: /metrics answers without a key`]
      : []),
    // Written empty (a placeholder never filled in: "", or no value at all), as unset: said too.
    ...(overrides.adminKey === undefined && isWrittenEmpty(ownKeys, "admin_key")
      ? ["admin_key is empty: the admin API takes only the stored admin keys"]
      : []),
    ...(isWrittenEmpty(ownKeys, "metrics_key")
      ? ["metrics_key is empty: /metrics answers without a key"]
      : []),
  ];
  const logPrompts = readBoolean(serveIssues, ["log_prompts"], tree.log_prompts) ?? false;
  const logLevel = readLogLevel(serveIssues, tree.log_level, overrides.logLevel);
  const chargeJournalDir = readChargeJournalDir(issues, tree.charge_journal_dir, overrides, options);
  const models = readModels({
    issues,
    value: tree.models,
    configFolder: options.configFolder,
    created: options.created,
  });

  if (issues.count > 0 || server === undefined || database === undefined) return { ok: false, issues };
  return {
    ok: true,
    config: {
      server,
      database,
      redis,
      adminKey,
      metricsKey,
      logPrompts,
      ...(logLevel === undefined ? {} : { logLevel }),
      ...(chargeJournalDir === undefined ? {} : { chargeJournalDir }),
      models: models ?? createDefaultCatalog(),
      builtInCatalog: models === undefined,
      source: options.source,
      ...(replaced.length === 0 ? {} : { replacedByEnvironment: replaced }),
      ...(unsetKeys.length === 0 ? {} : { unsetKeys }),
    },
  };
}

/** `log_level`, or `TOLLGATE_LOG_LEVEL` where it is set. */
function readLogLevel(
  issues: ConfigIssues,
  value: unknown,
  override: string | undefined,
): LogLevel | undefined {
  // In any case, as pino's own names are lowercase: `LOG_LEVEL=WARN` is written too.
  if (override === undefined) {
    return readChoice(
      issues,
      ["log_level"],
      typeof value === "string" ? value.toLowerCase() : value,
      LOG_LEVELS,
    );
  }
  const level = LOG_LEVELS.find((choice) => choice === override.toLowerCase());
  if (level === undefined) {
    issues.addForEnvironment(
      "TOLLGATE_LOG_LEVEL",
      `must be one of ${LOG_LEVELS.join(", ")} (got ${describeValue(override)})`,
    );
  }
  return level;
}

/**
 * The file's settings that environment variables replace with another value, as
 * "VARIABLE replaces KEY": a container image that sets TOLLGATE_DATABASE_URL (as ours does) would
 * otherwise quietly ignore the `database:` of a mounted config. The admin key is named, never shown.
 * Databases are compared as the files or servers they name: a relative SQLite path is the config
 * file's folder's in the file and the working folder's in the variable, so the same text may name
 * two files (and two texts one).
 */
function listReplacedValues(
  raw: ConfigMapping,
  overrides: EnvironmentOverrides,
  folders: { env: NodeJS.ProcessEnv; cwd: string; configFolder: string },
): string[] {
  const env = folders.env;
  const server = isMapping(raw.server) ? raw.server : {};
  // The file's value as it reads (`admin_key: \${TOLLGATE_ADMIN_KEY}` asks for the variable itself).
  const expand = (value: unknown) =>
    substituteVariables(value, { env, issues: new ConfigIssues(), mayBeUnset: () => true });
  const same = (variable: string, fileValue: string, value: string) => {
    if (variable !== "TOLLGATE_DATABASE_URL") return fileValue === value;
    const written = resolveDatabaseUrl(fileValue, folders.configFolder);
    const chosen = resolveDatabaseUrl(value, folders.cwd);
    return written.ok && chosen.ok ? written.url === chosen.url : fileValue === value;
  };
  const pairs: [string, string, unknown, string | undefined][] = [
    ["TOLLGATE_DATABASE_URL", "database", raw.database, overrides.database],
    ["TOLLGATE_REDIS_URL", "redis", raw.redis, overrides.redis],
    ["TOLLGATE_ADMIN_KEY", "admin_key", raw.admin_key, overrides.adminKey],
    ["TOLLGATE_LOG_LEVEL", "log_level", raw.log_level, overrides.logLevel],
    ["TOLLGATE_CHARGE_JOURNAL_DIR", "charge_journal_dir", raw.charge_journal_dir, overrides.chargeJournalDir],
    ["HOST", "server.host", server.host, overrides.host],
    ["PORT", "server.port", server.port, overrides.port],
  ];
  return pairs
    .filter(
      ([variable, , fileValue, value]) =>
        value !== undefined && fileValue != null && !same(variable, String(expand(fileValue)), value),
    )
    .map(([variable, key]) => `${variable} replaces ${key}`);
}

/** Values replaced by the environment are neither substituted nor validated. */
function removeOverriddenValues(raw: ConfigMapping, overrides: EnvironmentOverrides): ConfigMapping {
  const copy: ConfigMapping = { ...raw };
  if (overrides.database !== undefined) delete copy.database;
  if (overrides.redis !== undefined) delete copy.redis;
  if (overrides.adminKey !== undefined) delete copy.admin_key;
  if (overrides.logLevel !== undefined) delete copy.log_level;
  if (overrides.chargeJournalDir !== undefined) delete copy.charge_journal_dir;
  if (isMapping(copy.server)) {
    const server: ConfigMapping = { ...copy.server };
    if (overrides.host !== undefined) delete server.host;
    if (overrides.port !== undefined) delete server.port;
    copy.server = server;
  }
  return copy;
}

function readDatabase(
  issues: ConfigIssues,
  value: unknown,
  overrides: EnvironmentOverrides,
  options: ReadConfigOptions,
): string | undefined {
  if (overrides.database !== undefined) {
    const result = resolveDatabaseUrl(overrides.database, options.cwd);
    if (result.ok) return result.url;
    issues.addForEnvironment("TOLLGATE_DATABASE_URL", result.problem);
    return undefined;
  }
  const written = readString(issues, ["database"], value, {
    example: '"sqlite:./data/tollgate.db"',
    secret: true,
  });
  if (written === undefined) {
    if (!isAbsent(value)) return undefined;
    const result = resolveDatabaseUrl(DEFAULT_DATABASE, options.cwd);
    return result.ok ? result.url : undefined;
  }
  const result = resolveDatabaseUrl(written, options.configFolder);
  if (result.ok) return result.url;
  issues.add(["database"], result.problem);
  return undefined;
}

/**
 * `charge_journal_dir` (resolved against the file's folder), `TOLLGATE_CHARGE_JOURNAL_DIR` (against
 * the working folder), else `./data` in the working folder, where the default SQLite file lives.
 * Where a PostgreSQL replica keeps the charges the database has not taken yet
 * (billing/open-charge-journal.ts); a SQLite store keeps them beside its file instead.
 */
function readChargeJournalDir(
  issues: ConfigIssues,
  value: unknown,
  overrides: EnvironmentOverrides,
  options: ReadConfigOptions,
): string | undefined {
  if (overrides.chargeJournalDir !== undefined) return resolve(options.cwd, overrides.chargeJournalDir);
  const written = readString(issues, ["charge_journal_dir"], value, { example: '"/var/lib/tollgate"' });
  if (written !== undefined) return resolve(options.configFolder, written);
  return isAbsent(value) ? resolve(options.cwd, DEFAULT_CHARGE_JOURNAL_DIR) : undefined;
}

function readRedis(
  issues: ConfigIssues,
  value: unknown,
  overrides: EnvironmentOverrides,
): string | undefined {
  const fix = 'write a URL such as "redis://127.0.0.1:6379" (or rediss:// for TLS)';
  const check = (url: string): boolean =>
    (url.startsWith("redis://") || url.startsWith("rediss://")) && URL.canParse(url);
  if (overrides.redis !== undefined) {
    if (check(overrides.redis)) return overrides.redis;
    issues.addForEnvironment("TOLLGATE_REDIS_URL", `is not a Redis URL; ${fix}`);
    return undefined;
  }
  const url = readString(issues, ["redis"], value, { example: '"redis://127.0.0.1:6379"', allowEmpty: true });
  if (url === undefined || url === "") return undefined;
  if (check(url)) return url;
  issues.add(["redis"], `is not a Redis URL; ${fix}`);
  return undefined;
}

/** Whether a config value refers to an environment variable (`${VAR}`). */
function isReference(value: unknown): boolean {
  return typeof value === "string" && value.includes("${");
}

/** Whether `key` is in the file with an empty value: `""`, or none (`key:`, `key: ~`). */
function isWrittenEmpty(mapping: ConfigMapping, key: string): boolean {
  return Object.hasOwn(mapping, key) && (mapping[key] === "" || mapping[key] === null);
}

/** A key that may be left out or empty (both mean "not set"). */
function readOptionalSecret(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  example: string,
): string | undefined {
  const key = readHeaderValue(issues, path, value, { example, secret: true, allowEmpty: true });
  if (key === undefined || key === "") return undefined;
  const problem = describeBearerKeyProblem(key);
  if (problem === undefined) return key;
  issues.add(path, problem);
  return undefined;
}

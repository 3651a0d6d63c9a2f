/**
 * The catalogue: the models Tollgate offers, their prices and the engine that serves each.
 * Parsed and validated from `tollgate.yaml` (or the built-in default) by `load-config.ts`.
 */

/** Local inference through node-llama-cpp. */
export interface LlamaEngineConfig {
  type: "llama";
  /** A file path (absolute, or already resolved against the config file's folder) or a URI. */
  model: string;
  /** Sequences in the model's one context: requests that run at once. Default 4. */
  parallel: number;
  /** Requests that may wait for a free sequence before new ones get 503. Default 64. */
  maxQueue: number;
  /** CPU threads; default: physical cores minus one, at least one. */
  threads: number | undefined;
  /** GPU use: "auto" (default) lets node-llama-cpp pick, false forces the CPU. */
  gpu: "auto" | false;
}

/**
 * Fields of an `openai` engine's configuration that override the engine's defaults (see
 * `engine/openai/upstream-settings.ts`); YAML keys `connect_timeout_ms`, `first_byte_timeout_ms`,
 * `idle_timeout_ms`, `max_retries`, `cooldown_ms`, `max_connections`. `undefined` takes the default.
 */
export interface UpstreamTuning {
  connectTimeoutMs?: number | undefined;
  firstByteTimeoutMs?: number | undefined;
  idleTimeoutMs?: number | undefined;
  maxRetries?: number | undefined;
  cooldownMs?: number | undefined;
  maxConnections?: number | undefined;
}

/** An upstream OpenAI-compatible server, served by the upstream engine. */
export interface OpenAiEngineConfig extends UpstreamTuning {
  type: "openai";
  /**
   * `baseUrl` has no trailing slash; `apiKey` is `undefined` when not set or empty; `headers`
   * (lower-case names) are sent with every request, absent when there are none.
   */
  endpoints: { baseUrl: string; apiKey: string | undefined; headers?: Readonly<Record<string, string>> }[];
  /** The model name sent upstream. */
  model: string;
  fallbacks: string[];
}

export type EngineConfig = LlamaEngineConfig | OpenAiEngineConfig;

/** Prices per million tokens as decimal strings in the account currency, exactly as configured. */
export type Pricing =
  | { kind: "chat"; inputPerMillion: string; outputPerMillion: string }
  | { kind: "flat"; perMillion: string };

export type ModelKind = "chat" | "image" | "embedding";

/** One catalogue entry. */
export interface CatalogModel {
  /** Any string; may contain "/" and ":". */
  id: string;
  kind: ModelKind;
  ownedBy: string;
  pricing: Pricing;
  /** The configured context length, before capping at the model file's trained context. */
  contextLength: number | undefined;
  /** Unix time (seconds) reported as `created`. */
  created: number;
  /** `undefined` for models no engine serves here (image and embedding models, for now). */
  engine: EngineConfig | undefined;
}

/** pino's levels, from the fewest lines to the most; `silent` writes none. */
export const LOG_LEVELS = ["silent", "fatal", "error", "warn", "info", "debug", "trace"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The whole validated configuration. */
export interface Config {
  server: { host: string; port: number; bodyLimitBytes: number };
  /** `sqlite:PATH` or `postgres://...` */
  database: string;
  redis: string | undefined;
  adminKey: string | undefined;
  /** Key that `/metrics` requires; `undefined` means `/metrics` is open. */
  metricsKey: string | undefined;
  logPrompts: boolean;
  /** The lowest level logged; `undefined` means `info`. */
  logLevel?: LogLevel;
  /**
   * Absolute folder where a PostgreSQL replica keeps the charges the database did not take yet, so
   * that they outlive the process (billing/open-charge-journal.ts). Absent: kept in memory only.
   * A SQLite store keeps its own beside its file whatever this says.
   */
  chargeJournalDir?: string;
  models: CatalogModel[];
  /**
   * `true` when `models` is the built-in catalogue because the config names none (no file, or a
   * file without `models:`); absent or `false` when the config lists its own.
   */
  builtInCatalog?: boolean;
  /** The file it was read from, or `undefined` for the built-in default. */
  source: string | undefined;
  /**
   * The file's settings that environment variables replaced with other values ("PORT replaces
   * server.port"), for `serve` to warn about; absent when none did.
   */
  replacedByEnvironment?: string[];
  /**
   * What `admin_key` or `metrics_key` written as `${VAR}` whose variable is not set means (the
   * key is not set), for `serve` to warn about; absent when none is.
   */
  unsetKeys?: string[];
}

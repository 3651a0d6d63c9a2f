/** The values a configuration gets for what it leaves out, and the ranges it must stay in. */

/** The file looked for in the working folder when neither `--config` nor `TOLLGATE_CONFIG` names one. */
export const DEFAULT_CONFIG_FILE_NAME = "tollgate.yaml";

export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 8080;
/** 8 MiB. */
export const DEFAULT_BODY_LIMIT_BYTES = 8 * 1024 * 1024;
/** Relative to the working folder the service starts in. */
export const DEFAULT_DATABASE = "sqlite:./data/tollgate.db";
/**
 * Where a PostgreSQL replica keeps the charges the database has not taken yet, relative to the
 * working folder (beside the default SQLite file).
 */
export const DEFAULT_CHARGE_JOURNAL_DIR = "./data";
export const DEFAULT_OWNED_BY = "tollgate";

/** `engine.parallel` (llama): default and allowed range. */
export const DEFAULT_PARALLEL = 4;
export const PARALLEL_RANGE = { min: 1, max: 64 } as const;

/** `engine.max_queue` (llama): default and allowed range. */
export const DEFAULT_MAX_QUEUE = 64;
export const MAX_QUEUE_RANGE = { min: 0, max: 10_000 } as const;

/** `engine.threads` (llama): allowed range; the default is decided by the engine. */
export const THREADS_RANGE = { min: 1, max: 1024 } as const;

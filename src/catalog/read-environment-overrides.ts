import type { ConfigPurpose } from "./read-config.ts";

/** Environment variables that replace a configuration value; an empty value counts as unset. */
export interface EnvironmentOverrides {
  host: string | undefined;
  port: string | undefined;
  database: string | undefined;
  redis: string | undefined;
  adminKey: string | undefined;
  logLevel: string | undefined;
  chargeJournalDir: string | undefined;
}

/** The overrides set in `env`; a CLI command (`purpose` `command`) reads no `HOST`, `PORT` or log level. */
export function readEnvironmentOverrides(
  env: NodeJS.ProcessEnv,
  purpose: ConfigPurpose,
): EnvironmentOverrides {
  const read = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value === "" ? undefined : value;
  };
  return {
    host: purpose === "serve" ? read("HOST") : undefined,
    port: purpose === "serve" ? read("PORT") : undefined,
    database: read("TOLLGATE_DATABASE_URL"),
    redis: read("TOLLGATE_REDIS_URL"),
    adminKey: read("TOLLGATE_ADMIN_KEY"),
    // Only the server logs: an admin command is not stopped by a level it would not use.
    logLevel: purpose === "serve" ? read("TOLLGATE_LOG_LEVEL") : undefined,
    chargeJournalDir: read("TOLLGATE_CHARGE_JOURNAL_DIR"),
  };
}

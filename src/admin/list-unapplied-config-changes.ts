import type { Config } from "../catalog/catalog.ts";

type SettingValue = string | number | boolean | undefined;

/** Options of {@link listUnappliedConfigChanges}. */
export interface UnappliedConfigChangesOptions {
  /** `serve --host` was given: the config's `server.host` is not used, now or after a restart. */
  hostFromCommandLine?: boolean;
  /** `serve --port` was given: the config's `server.port` is not used, now or after a restart. */
  portFromCommandLine?: boolean;
}

/**
 * The settings a reload (SIGHUP) does not apply, as the config file names them, in the order
 * they were compared: it swaps in the catalogue and prices only, so an operator rotating a
 * leaked `admin_key` must be told that it still takes the old one until a restart. Never the
 * values: several are secrets.
 */
export function listUnappliedConfigChanges(
  running: Config,
  next: Config,
  options: UnappliedConfigChangesOptions = {},
): string[] {
  const settings: [name: string, running: SettingValue, next: SettingValue][] = [
    ["server.host", running.server.host, next.server.host],
    ["server.port", running.server.port, next.server.port],
    ["server.body_limit", running.server.bodyLimitBytes, next.server.bodyLimitBytes],
    ["database", running.database, next.database],
    ["redis", running.redis, next.redis],
    ["admin_key", running.adminKey, next.adminKey],
    ["metrics_key", running.metricsKey, next.metricsKey],
    ["log_prompts", running.logPrompts, next.logPrompts],
    ["log_level", running.logLevel ?? "info", next.logLevel ?? "info"],
    ["charge_journal_dir", running.chargeJournalDir, next.chargeJournalDir],
  ];
  const fromCommandLine = new Set([
    ...(options.hostFromCommandLine === true ? ["server.host"] : []),
    ...(options.portFromCommandLine === true ? ["server.port"] : []),
  ]);
  return settings
    .filter(([name, before, after]) => before !== after && !fromCommandLine.has(name))
    .map(([name]) => name);
}

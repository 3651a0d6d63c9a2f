import { describe, expect, it } from "vitest";
import { listUnappliedConfigChanges } from "../../src/admin/list-unapplied-config-changes.ts";
import type { Config } from "../../src/catalog/catalog.ts";

const running: Config = {
  server: { host: "127.0.0.1", port: 8080, bodyLimitBytes: 8 * 1024 * 1024 },
  database: "sqlite:/data/tollgate.db",
  redis: undefined,
  adminKey: "old-admin-key",
  metricsKey: undefined,
  logPrompts: false,
  models: [],
  source: "/etc/tollgate.yaml",
};

describe("settings a reload does not apply", () => {
  it("are none when only the catalogue changed", () => {
    const next: Config = { ...running, models: [], source: "/etc/tollgate.yaml" };
    expect(listUnappliedConfigChanges(running, next)).toEqual([]);
  });

  it("are named as the config file names them, never with their values", () => {
    const next: Config = {
      server: { host: "0.0.0.0", port: 9090, bodyLimitBytes: 1024 },
      database: "postgres://tollgate@db/tollgate",
      redis: "redis://127.0.0.1:6379",
      adminKey: "new-admin-key",
      metricsKey: "new-metrics-key",
      logPrompts: true,
      models: [],
      source: running.source,
    };
    expect(listUnappliedConfigChanges(running, next)).toEqual([
      "server.host",
      "server.port",
      "server.body_limit",
      "database",
      "redis",
      "admin_key",
      "metrics_key",
      "log_prompts",
    ]);
  });

  it("name charge_journal_dir when it is set, changed or removed (the journal opens at start only)", () => {
    const withJournal: Config = { ...running, chargeJournalDir: "/var/lib/tollgate/journal" };
    expect(listUnappliedConfigChanges(running, withJournal)).toEqual(["charge_journal_dir"]);
    expect(
      listUnappliedConfigChanges(withJournal, { ...withJournal, chargeJournalDir: "/srv/journal" }),
    ).toEqual(["charge_journal_dir"]);
    expect(listUnappliedConfigChanges(withJournal, running)).toEqual(["charge_journal_dir"]);
    expect(listUnappliedConfigChanges(withJournal, { ...withJournal })).toEqual([]);
  });

  it("leave out server.host and server.port when serve --host and --port set them", () => {
    const next: Config = { ...running, server: { ...running.server, host: "0.0.0.0", port: 9090 } };
    expect(
      listUnappliedConfigChanges(running, next, { hostFromCommandLine: true, portFromCommandLine: true }),
    ).toEqual([]);
    expect(listUnappliedConfigChanges(running, next, { portFromCommandLine: true })).toEqual(["server.host"]);
  });
});

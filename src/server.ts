import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { bootstrap } from "./admin/bootstrap.ts";
import type { RefusedAdminKey } from "./admin/find-refused-admin-key.ts";
import { warnOfRefusedAdminKey } from "./admin/warn-of-refused-admin-key.ts";
import { buildApp, createServerMetrics } from "./api/build-app.ts";
import { describeListenError, formatHostPort } from "./api/describe-listen-error.ts";
import { InFlightRequests, leaseLapsingError } from "./api/in-flight-requests.ts";
import { keepFlushingResponses } from "./api/keep-flushing-responses.ts";
import { registerAdminRoutes } from "./api/routes/admin.ts";
import { createAuthenticator } from "./auth/authenticator.ts";
import { warnOfShortAdminKey } from "./auth/warn-of-short-admin-key.ts";
import { watchKeyRevocations } from "./auth/watch-key-revocations.ts";
import { keepLeases } from "./billing/keep-leases.ts";
import { LeaseClock } from "./billing/lease-clock.ts";
import { createSettleEventLog } from "./billing/log-settle-events.ts";
import { openChargeJournal } from "./billing/open-charge-journal.ts";
import { BillingAdmission } from "./billing/reserve-and-settle.ts";
import type { Config } from "./catalog/catalog.ts";
import { checkReady } from "./check-ready.ts";
import { type ClusterSettings, readClusterSettings } from "./cluster/cluster-settings.ts";
import { connectCluster } from "./cluster/connect-cluster.ts";
import { resolveReplicaId } from "./cluster/resolve-replica-id.ts";
import { createLogger } from "./create-logger.ts";
import { createEngine, loadEngineModules } from "./engine/create-engine.ts";
import type { ChatEngine } from "./engine/engine.ts";
import { KeyLimits } from "./limits/key-limits.ts";
import { closeWhenIdle } from "./models/close-when-idle.ts";
import { ModelRegistry } from "./models/model-registry.ts";
import { releaseUnusedMemory } from "./process/release-unused-memory.ts";
import { createServerDrain, type DrainStoreWaits } from "./server-drain.ts";
import { claimReplicaId, openStore } from "./store/open-store.ts";
import type { Store } from "./store/store.ts";

/** How long a start waits for its replica id, held by another server, to come free. */
const CLAIM_IN_USE_WAIT_MS = 3_000;
/** The starter account's opening credit on first start, so the printed curl line works. */
export const STARTER_BALANCE_NANO = 10_000_000_000n;

/** A running Tollgate server. */
export interface RunningServer {
  app: FastifyInstance;
  /** `http://host:port/v1` */
  baseUrl: string;
  /** Keys created by this start's first-run bootstrap, shown once; empty on later starts. */
  createdKeys: { adminKey?: string; starterKey?: string; refusedAdminKey?: RefusedAdminKey | undefined };
  /**
   * Drains and stops: refuses new requests (503), lets running ones finish for up to
   * `graceMs`, then cuts the rest (streams end with an error event), settles every request
   * and closes the engines and the store. Rejects, once stopped, when a charge was given up
   * (the store did not take it before the end).
   */
  shutdown(options?: { graceMs?: number }): Promise<void>;
  /** Stops at once: {@link shutdown} with no grace. */
  close(): Promise<void>;
  /**
   * Swaps in a new catalogue and prices (SIGHUP), without dropping requests in flight. Only
   * `models` is taken from the new config; server, database and keys stay as they started.
   * Resolves once the new catalogue serves (an engine type the old one did not use is imported
   * first).
   */
  reload(config: Config): Promise<void>;
}

/**
 * A difference between this machine's clock and PostgreSQL's beyond which a replica warns at
 * start: a fraction of the leases' margin (60 s leases renewed every 20 s), since replicas write
 * and judge leases by their own clocks.
 */
const CLOCK_SKEW_WARNING_MS = 5_000;

export interface StartServerOptions {
  config: Config;
  /** Overrides `config.server` (tests listen on port 0). */
  host?: string;
  port?: number;
  /** Pino logger settings; `false` silences logs. Default: JSON lines at info on stdout. */
  logger?: false | { level?: string; destination?: NodeJS.WritableStream };
  /** Overrides how long a client may leave its answer unread (tests; default one minute). */
  clientStallTimeoutMs?: number;
  /**
   * Overrides how long a shutdown waits for a store that does not answer (tests): a settle
   * attempt (default `DRAIN_SETTLE_TIMEOUT_MS`) and the store's close (`STORE_CLOSE_WAIT_MS`).
   */
  drainStoreWaits?: DrainStoreWaits;
  /** The bytes of request bodies held at once (tests); default from the heap (body-budget.ts). */
  bodyBudgetBytes?: number;
  /**
   * Ends a start that waits for another process's migration of a PostgreSQL store (a stop
   * signal to a server still starting): the start then fails.
   */
  signal?: AbortSignal;
  /**
   * Give back the memory the start took and no longer uses, before listening
   * (release-unused-memory.ts). What `tollgate serve` does; tests leave it out (it takes
   * 50-200 ms).
   */
  releaseStartupMemory?: boolean;
  /**
   * Told the server's logger as soon as it exists, before the store opens: what logs a crash
   * during the start must log through it (exit-on-crash.ts), since a second logger on the same
   * stdout would interleave its line with the lines this one still holds.
   */
  onLogger?: (logger: Logger) => void;
}

/** Opens the store, loads the engines, listens, then runs the first-run bootstrap. */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  // Read before anything opens: a bad value stops the start with nothing left open.
  const clusterSettings = readClusterSettings(process.env);
  // Only the engines the catalogue uses are imported (an upstream model brings undici).
  await loadEngineModules(options.config.models);
  const logger = createLogger(options);
  options.onLogger?.(logger);
  warnOfShortAdminKey(options.config.adminKey, logger);
  let migrating: { since: number; created: boolean } | undefined;
  const store = await openStore(options.config.database, {
    owner: true,
    onMigrationWait: ({ holder, waitedMs }) =>
      logger.warn(
        {
          waitedSeconds: Math.round(waitedMs / 1000),
          ...(holder === undefined
            ? {}
            : {
                holderPid: holder.pid,
                holderApplication: holder.applicationName,
                ...(holder.clientAddress === undefined ? {} : { holderClient: holder.clientAddress }),
              }),
        },
        "waiting for another process to finish migrating the PostgreSQL store (it holds the migration lock)",
      ),
    onMigrating: ({ pending, created }) => {
      migrating = { since: performance.now(), created };
      logger.info(
        { migrations: pending },
        created
          ? "creating the store's tables"
          : "migrating the store to this version's schema (a large usage table takes a while; the server listens when it is done)",
      );
    },
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  if (migrating !== undefined) {
    const durationMs = Math.round(performance.now() - migrating.since);
    logger.info({ durationMs }, migrating.created ? "the store is created" : "the store is migrated");
  }
  // A start that fails closes what it opened, last first: nothing (the store's claim, Redis,
  // a model loading or downloading) keeps the failed process alive.
  const opened: { close(): Promise<void> }[] = [store];
  try {
    return await startOnStore(options, { store, logger, clusterSettings, opened });
  } catch (error) {
    for (const resource of opened.reverse()) await resource.close().catch(() => {});
    throw error;
  }
}

async function startOnStore(
  options: StartServerOptions,
  started: {
    store: Store;
    logger: Logger;
    clusterSettings: ClusterSettings;
    opened: { close(): Promise<void> }[];
  },
): Promise<RunningServer> {
  const { store, logger, clusterSettings, opened } = started;
  const { config } = options;
  const authenticator = createAuthenticator({ store, configuredAdminKey: config.adminKey });
  const revocations = watchKeyRevocations({ store, logger });
  const host = options.host ?? config.server.host;
  const replicaId = resolveReplicaId(host, options.port ?? config.server.port);
  // Claimed before releasing "its own" reservations: with an id another live replica uses, they
  // would be that replica's running requests, served then without being paid for.
  const replicaClaim = await claimReplicaId(config.database, {
    replicaId,
    // Another replica may hold it a moment, recording what this id's journal owes (see
    // open-charge-journal.ts).
    waitWhenInUseMs: CLAIM_IN_USE_WAIT_MS,
    onEvent: (event) => {
      switch (event.type) {
        case "lost":
          logger.warn({ err: event.error, replicaId }, "lost the claim on this replica id; taking it again");
          return;
        case "retry-failed":
          logger.warn(
            { err: event.error, replicaId },
            "taking the claim on this replica id again failed; retrying",
          );
          return;
        case "claimed-elsewhere":
          logger.error(
            { err: event.error, replicaId },
            "another running server uses this replica id; retrying",
          );
          return;
        case "retaken":
          logger.info({ replicaId }, "claimed this replica id again");
          return;
        default:
          event satisfies never;
      }
    },
  });
  if (replicaClaim !== undefined) {
    opened.push(replicaClaim);
    if (Math.abs(replicaClaim.clockSkewMs) > CLOCK_SKEW_WARNING_MS) {
      logger.warn(
        { clockSkewMs: replicaClaim.clockSkewMs },
        "this machine's clock differs from PostgreSQL's by more than 5 s; keep replica clocks in step (NTP): credits carry each replica's own time and key expiry is judged on it (usage rows, accounts and keys are stamped with PostgreSQL's, and reservation leases go by it)",
      );
    }
  }
  // Charges a previous run owed when it ended (the store did not take them): recorded before the
  // leftover reservations are released (see open-charge-journal.ts). The metrics count them as
  // the ledger does (those of the start once the metrics exist): their runs never did.
  const journalCharges: [string, bigint][] = [];
  let countJournalCharge = (model: string, chargedNano: bigint) => {
    journalCharges.push([model, chargedNano]);
  };
  const owedAtStart = await openChargeJournal({
    databaseUrl: config.database,
    store,
    logger,
    replica: { id: replicaId, storeTag: replicaClaim?.storeTag, folder: config.chargeJournalDir },
    onRecorded: (model, chargedNano) => countJournalCharge(model, chargedNano),
  });
  // One server owns a SQLite file: whatever reservation is open now was left by a crash. A
  // shared store (PostgreSQL) has other replicas' live reservations: release only this
  // replica's own now. Those whose lease expired go with the first sweep (keep-leases.ts), not
  // at once: a replica starting just after a database outage would find the live reservations
  // of replicas that could not renew them yet expired too (SPEC §11: never another's live ones).
  const released = await store.releaseReservations({
    replicaId: config.database.startsWith("sqlite:") ? "*" : replicaId,
  });
  // With Redis: rate limits shared by every replica, and revocations told to all of them.
  const cluster = await connectCluster({
    redisUrl: config.redis,
    settings: clusterSettings,
    logger,
    // Events published while the subscription was down are lost: drop every cached key.
    onResubscribed: () => authenticator.forget(),
  });
  opened.push(cluster);
  cluster.bus.subscribe((event) => {
    switch (event.type) {
      case "key-changed":
        authenticator.forget(event.publicId);
        revocations.changed(event.publicId);
        return;
      case "account-credited":
        // Nothing caches balances: every reservation reads the store.
        return;
      default:
        event satisfies never;
    }
  });
  const keyLimits = new KeyLimits(cluster.limiter);
  // An engine no longer used is closed once its requests have ended: one a reload replaced at
  // once, or one a replacement took over from once that had loaded (ModelRegistry.replace).
  const retireEngine = (engine: ChatEngine) =>
    closeWhenIdle(engine, {
      isHeld: (held) => registry.isHeld(held),
      onError: (error) => logger.error({ err: error }, "closing a replaced engine failed"),
      onClosed: () => registry.forgetRetired(engine),
    });
  const registry = new ModelRegistry(
    config.models,
    (model, context) => createEngine(model, logger, context),
    {
      onRetired: retireEngine,
      logger,
    },
  );
  opened.push(registry);
  // Readiness waits for the models of the start only: a model a reload adds (or loads again) may
  // download for many minutes, and taking every replica out of rotation for it would stop the
  // models they serve meanwhile; /v1/models shows it loading.
  // Weak: an engine a reload replaced is not kept for this (it held every engine replaced since).
  const startupEngines = new WeakSet(
    registry.list().flatMap((entry) => (entry.engine === undefined ? [] : [entry.engine])),
  );
  if (released > 0) logger.warn({ released }, "released reservations left by the previous run");
  const inFlight = new InFlightRequests();
  const metrics = createServerMetrics(registry, inFlight);
  for (const [model, chargedNano] of journalCharges) metrics.addCharge(model, chargedNano);
  countJournalCharge = (model, chargedNano) => metrics.addCharge(model, chargedNano);
  // Leases are written and judged on the store's clock, which replicas share (lease-clock.ts).
  const leaseClock = new LeaseClock();
  await leaseClock.sync(() => store.readClock());
  // What happens to charges the store does not take at once, logged (log-settle-events.ts).
  const settleEvents = createSettleEventLog({
    logger,
    journalPath: owedAtStart.path,
    addCharge: (model, chargedNano) => metrics.addCharge(model, chargedNano),
  });
  const admission = new BillingAdmission({
    store,
    limits: keyLimits,
    replicaId,
    leaseNow: () => leaseClock.now(),
    journal: owedAtStart.journal,
    onJournalError: settleEvents.onJournalError,
    onSettleError: settleEvents.onSettleError,
    onSettleRecovered: settleEvents.onSettleRecovered,
    drainSettleTimeoutMs: options.drainStoreWaits?.settleMs,
  });
  // What the store did not take at this start is retried with the charges this run comes to owe.
  admission.retryOwed(owedAtStart.stillOwed);
  const leases = keepLeases({
    store,
    replicaId,
    liveReservationIds: () => admission.liveReservationIds,
    sweep: !config.database.startsWith("sqlite:"),
    afterSweep: owedAtStart.adoptOrphans,
    owedElsewhere: owedAtStart.owedElsewhere,
    onLapsing: () => inFlight.abortAll(leaseLapsingError()),
    logger,
    clock: leaseClock,
  });
  const app = buildApp({
    registry,
    inFlight,
    metrics,
    authenticate: (header) => authenticator.authenticate(header),
    admission,
    keyLimits,
    registerAdminRoutes: (scope, getKey) =>
      registerAdminRoutes(scope, {
        store,
        getKey,
        modelIds: () => registry.list().map((entry) => entry.model.id),
        clientStallTimeoutMs: options.clientStallTimeoutMs,
        onKeyChanged: (publicId) => {
          authenticator.forget(publicId);
          revocations.changed(publicId);
          cluster.bus.publish({ type: "key-changed", publicId });
        },
        onAccountCredited: (accountId) => cluster.bus.publish({ type: "account-credited", accountId }),
      }),
    watchRevocations: (listener) => revocations.watch(listener),
    metricsKey: config.metricsKey,
    checkReady: () =>
      checkReady({
        store,
        registry,
        startupEngines,
        pendingSettlements: () => admission.pendingSettlements,
        probePendingSettlements: () => admission.probePendingSettlements(),
      }),
    bodyLimitBytes: config.server.bodyLimitBytes,
    ...(options.bodyBudgetBytes === undefined ? {} : { bodyBudgetBytes: options.bodyBudgetBytes }),
    ...(options.clientStallTimeoutMs === undefined
      ? {}
      : { clientStallTimeoutMs: options.clientStallTimeoutMs }),
    logPrompts: config.logPrompts,
    logger,
  });
  const flushing = keepFlushingResponses(app.server);
  app.addHook("onClose", async () => {
    leases.stop();
    await registry.close();
  });
  opened.push(app);
  const requestedPort = options.port ?? config.server.port;
  try {
    // The start's garbage goes before the first request can come.
    if (options.releaseStartupMemory === true) releaseUnusedMemory();
    await app.listen({ host, port: requestedPort });
  } catch (error) {
    throw describeListenError(error, host, requestedPort);
  }
  // Only once the server listens: keys made by a start that then failed would never be shown.
  const createdKeys = await bootstrap(store, {
    configuredAdminKey: config.adminKey,
    starterBalanceNano: STARTER_BALANCE_NANO,
  });
  warnOfRefusedAdminKey(createdKeys, config.source, logger);
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.server.port;
  const drain = createServerDrain({
    app,
    inFlight,
    admission,
    cluster,
    store,
    replicaClaim,
    settleEvents,
    logger,
    storeWaits: options.drainStoreWaits,
    flushing,
  });
  return {
    app,
    baseUrl: `http://${formatHostPort(host, port)}/v1`,
    createdKeys,
    shutdown: drain.shutdown,
    close: drain.close,
    async reload(next: Config) {
      // A shutdown has closed the engines: replacing them would start new ones nothing closes.
      const ignored = () => {
        if (!drain.isShuttingDown()) return false;
        logger.info("not reloading the catalogue: the server is shutting down");
        return true;
      };
      if (ignored()) return;
      await loadEngineModules(next.models);
      if (ignored()) return;
      const retired = registry.replace(next.models);
      for (const engine of retired) retireEngine(engine);
      // A model whose new engine still loads is served by its previous one until it has loaded.
      const loadingReplacements = registry.listReplacements();
      logger.info(
        {
          models: next.models.length,
          replacedEngines: retired.length,
          ...(loadingReplacements.length === 0 ? {} : { loadingReplacements }),
        },
        "catalogue reloaded",
      );
    },
  };
}

import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { bootstrap } from "./admin/bootstrap.ts";
import { buildApp } from "./api/build-app.ts";
import { createAuthenticator } from "./auth/authenticator.ts";
import type { Config } from "./catalog/catalog.ts";
import { createEngine } from "./engine/create-engine.ts";
import { ModelRegistry } from "./models/model-registry.ts";
import { openStore } from "./store/open-store.ts";

/** A running Tollgate server. */
export interface RunningServer {
  app: FastifyInstance;
  /** `http://host:port/v1` */
  baseUrl: string;
  /** Keys created by this start's first-run bootstrap, shown once; empty on later starts. */
  createdKeys: { adminKey?: string; starterKey?: string };
  close(): Promise<void>;
}

export interface StartServerOptions {
  config: Config;
  /** Overrides `config.server` (tests listen on port 0). */
  host?: string;
  port?: number;
  /** Pino logger settings; `false` silences logs. Default: JSON at info. */
  logger?: false | { level: string };
}

/** Opens the store, runs the first-run bootstrap, loads the engines and listens. */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  const store = await openStore(config.database);
  const createdKeys = await bootstrap(store, { configuredAdminKey: config.adminKey });
  const authenticator = createAuthenticator({ store, configuredAdminKey: config.adminKey });
  const logger = pino(
    options.logger === false ? { enabled: false } : { level: options.logger?.level ?? "info" },
  );
  const registry = new ModelRegistry(config.models, (model) => createEngine(model, logger));
  const app = buildApp({
    registry,
    authenticate: (header) => authenticator.authenticate(header),
    bodyLimitBytes: config.server.bodyLimitBytes,
    logger,
  });
  app.addHook("onClose", async () => {
    await registry.close();
  });
  const host = options.host ?? config.server.host;
  await app.listen({ host, port: options.port ?? config.server.port });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.server.port;
  return {
    app,
    baseUrl: `http://${host.includes(":") ? `[${host}]` : host}:${port}/v1`,
    createdKeys,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

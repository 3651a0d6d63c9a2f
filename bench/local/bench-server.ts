import { join } from "node:path";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";

/** A local model a benchmark server offers. */
export interface BenchModelEntry {
  id: string;
  path: string;
  parallel: number;
  threads: number;
  /** Per-sequence context length. */
  contextLength: number;
  maxQueue?: number;
}

/** A running benchmark server with a funded key that has no limits. */
export interface BenchServer {
  server: RunningServer;
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  key: string;
  close(): Promise<void>;
}

/** The catalogue entry of a local benchmark model (CPU only, like the direct side). */
export function createBenchCatalogModel(entry: BenchModelEntry): CatalogModel {
  return {
    id: entry.id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.40" },
    contextLength: entry.contextLength,
    created: 1_700_000_000,
    engine: {
      type: "llama",
      model: entry.path,
      parallel: entry.parallel,
      maxQueue: entry.maxQueue ?? 64,
      threads: entry.threads,
      gpu: false,
    },
  };
}

/**
 * Starts a real Tollgate server on 127.0.0.1 (an ephemeral port) with a fresh SQLite file in
 * `folder`, the given catalogue, and an account funded well beyond what a benchmark spends.
 */
export async function startBenchServer(options: {
  folder: string;
  models: readonly CatalogModel[];
}): Promise<BenchServer> {
  const config: Config = {
    server: { host: "127.0.0.1", port: 0, bodyLimitBytes: 1024 * 1024 },
    database: `sqlite:${join(options.folder, "tollgate.db")}`,
    redis: undefined,
    adminKey: undefined,
    metricsKey: undefined,
    logPrompts: false,
    source: undefined,
    models: [...options.models],
  };
  // As `tollgate serve` gives back memory: the memory measured is the product's.
  const server = await startServer({
    config,
    port: 0,
    logger: false,
    releaseStartupMemory: true,
  });
  const store = await openStore(config.database);
  let key: string;
  try {
    const account = await createAccount(store, { name: "bench", balanceNano: 1_000_000n * 1_000_000_000n });
    key = (await createKey(store, { role: "user", accountId: account.id, name: "bench" })).key;
  } finally {
    await store.close();
  }
  return {
    server,
    baseUrl: server.baseUrl,
    key,
    close: () => server.close(),
  };
}

/** Resolves once every listed model reports `available` (throws on `unavailable` or after the timeout). */
export async function waitForModels(options: {
  baseUrl: string;
  key: string;
  ids: readonly string[];
  timeoutMilliseconds?: number;
}): Promise<void> {
  const deadline = performance.now() + (options.timeoutMilliseconds ?? 120_000);
  for (;;) {
    const response = await fetch(`${options.baseUrl}/models`, {
      headers: { authorization: `Bearer ${options.key}` },
    });
    const body = (await response.json()) as { data?: { id: string; status?: string }[] };
    const statuses = new Map((body.data ?? []).map((model) => [model.id, model.status]));
    const unavailable = options.ids.filter((id) => statuses.get(id) === "unavailable");
    if (unavailable.length > 0) throw new Error(`models unavailable: ${unavailable.join(", ")}`);
    if (options.ids.every((id) => statuses.get(id) === "available")) return;
    if (performance.now() > deadline) throw new Error(`models not loaded in time: ${options.ids.join(", ")}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

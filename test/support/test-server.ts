import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAccount } from "../../src/admin/create-account.ts";
import { type CreateKeyInput, createKey } from "../../src/admin/create-key.ts";
import { parseAmount } from "../../src/billing/money.ts";
import type { CatalogModel, Config, UpstreamTuning } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { getTestModelPath } from "./test-model.ts";

/** The id of the tiny local chat model every test server offers. */
export const TINY_MODEL = "tiny";
/**
 * A small model (about 90 tokens/s here) that rarely ends by itself, with one sequence and no
 * queue: a stream on it holds the model's only sequence for many seconds (see `withEndlessModel`).
 */
export const ENDLESS_MODEL = "tiny-endless";
/** An embedding model with "/" and ":" in its id, that nothing serves. */
export const EMBEDDING_MODEL = "acme/embed:v1";

export interface TestServer {
  server: RunningServer;
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  starterKey: string;
  starterAccountId: string;
  adminKey: string;
  /** A second connection to the server's SQLite file, for making keys. */
  store: Store;
  /** Makes a key on the starter account (or the given input). */
  createKey(input?: Partial<CreateKeyInput>, now?: () => Date): Promise<string>;
  /** Opens an account with `balance` (a decimal amount) and makes a key for it. */
  createFundedKey(
    name: string,
    balance: string,
    input?: Partial<CreateKeyInput>,
  ): Promise<{ accountId: string; key: string; publicId: string }>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  parallel?: number;
  maxQueue?: number;
  contextLength?: number;
  bodyLimitBytes?: number;
  extraModels?: CatalogModel[];
  /** Where the server's JSON log lines go; default: no logs. */
  logDestination?: NodeJS.WritableStream;
  /** `/metrics` key; default none (open). */
  metricsKey?: string;
  /** `log_prompts`; default false. */
  logPrompts?: boolean;
  /** Also serve {@link ENDLESS_MODEL}: parallel 1, max_queue 0, for disconnect tests. */
  withEndlessModel?: boolean;
}

/** The catalogue entry of the tiny local model. */
export function createTinyModelEntry(path: string, options: TestServerOptions = {}): CatalogModel {
  return {
    id: TINY_MODEL,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.40" },
    contextLength: options.contextLength ?? 1024,
    created: 1_700_000_000,
    engine: {
      type: "llama",
      model: path,
      parallel: options.parallel ?? 2,
      maxQueue: options.maxQueue ?? 8,
      threads: 1,
      gpu: false,
    },
  };
}

/**
 * A catalogue chat model served by the upstream at `baseUrl` (1.00 in, 2.00 out per million),
 * known there as `upstreamModel` (default: the id), sent `apiKey` if given.
 */
export function createUpstreamModelEntry(
  id: string,
  baseUrl: string,
  options: { apiKey?: string; upstreamModel?: string; tuning?: UpstreamTuning; contextLength?: number } = {},
): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1.00", outputPerMillion: "2.00" },
    contextLength: options.contextLength ?? 8192,
    created: 1_700_000_100,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl, apiKey: options.apiKey }],
      model: options.upstreamModel ?? id,
      fallbacks: [],
      ...options.tuning,
    },
  };
}

/**
 * A config for a test server: on 127.0.0.1, port 0, bodies up to 1 MiB, without Redis, admin key,
 * metrics key or prompt logging, unless `settings` say otherwise; `database` and `models` its own.
 */
export function createTestConfig(settings: Pick<Config, "database" | "models"> & Partial<Config>): Config {
  return {
    server: { host: "127.0.0.1", port: 0, bodyLimitBytes: 1024 * 1024 },
    redis: undefined,
    adminKey: undefined,
    metricsKey: undefined,
    logPrompts: false,
    source: undefined,
    ...settings,
  };
}

/** Starts a real Tollgate server on 127.0.0.1 with a fresh SQLite file and the tiny model. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-test-"));
  const modelPath = await getTestModelPath();
  const config = createTestConfig({
    server: { host: "127.0.0.1", port: 0, bodyLimitBytes: options.bodyLimitBytes ?? 1024 * 1024 },
    database: `sqlite:${join(folder, "tollgate.db")}`,
    metricsKey: options.metricsKey,
    logPrompts: options.logPrompts ?? false,
    models: [
      createTinyModelEntry(modelPath, options),
      {
        id: EMBEDDING_MODEL,
        kind: "embedding",
        ownedBy: "acme",
        pricing: { kind: "flat", perMillion: "0.02" },
        contextLength: undefined,
        created: 1_700_000_001,
        engine: undefined,
      },
      ...(options.withEndlessModel
        ? [
            {
              ...createTinyModelEntry(await getTestModelPath({ endless: true, size: "small" }), {
                parallel: 1,
                maxQueue: 0,
                contextLength: 2048,
              }),
              id: ENDLESS_MODEL,
            },
          ]
        : []),
      ...(options.extraModels ?? []),
    ],
  });
  const server = await startServer({
    config,
    logger:
      options.logDestination === undefined ? false : { level: "info", destination: options.logDestination },
  });
  const { starterKey, adminKey } = server.createdKeys;
  if (starterKey === undefined || adminKey === undefined) throw new Error("first start made no keys");
  const store = await openStore(config.database);
  const starter = await store.getAccountByName("starter");
  if (starter === undefined) throw new Error("no starter account");
  return {
    server,
    baseUrl: server.baseUrl,
    origin: server.baseUrl.replace(/\/v1$/, ""),
    starterKey,
    starterAccountId: starter.id,
    adminKey,
    store,
    async createKey(input = {}, now) {
      const created = await createKey(
        store,
        { role: "user", accountId: starter.id, ...input },
        now === undefined ? {} : { now },
      );
      return created.key;
    },
    async createFundedKey(name, balance, input = {}) {
      const account = await createAccount(store, { name, balanceNano: parseAmount(balance) });
      const created = await createKey(store, { role: "user", accountId: account.id, ...input });
      return { accountId: account.id, key: created.key, publicId: created.record.publicId };
    },
    async close() {
      await server.close();
      await store.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** Waits until `model` has `count` requests waiting for a sequence, as `/metrics` tells it. */
export async function untilModelWaiting(test: TestServer, model: string, count: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const metrics = await (await fetch(`${test.origin}/metrics`)).text();
    if (metrics.includes(`tollgate_model_requests{model="${model}",state="waiting"} ${count}`)) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`model '${model}' never had ${count} waiting`);
}

/** An error answer's body, as the contract shapes it. */
export interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

/** An error answer's status and error object. */
export async function readError(response: Response): Promise<{ status: number; error: ErrorBody["error"] }> {
  return { status: response.status, error: ((await response.json()) as ErrorBody).error };
}

/**
 * A chat request with `key` (default `test`'s starter key) to its tiny model: "Go." and
 * `maxTokens` tokens, the fields of `body` over those.
 */
export function postTinyChat(
  test: TestServer,
  body: Record<string, unknown>,
  maxTokens = 8,
  key = test.starterKey,
): Promise<Response> {
  return fetch(`${test.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Go." }],
      max_tokens: maxTokens,
      ...body,
    }),
  });
}

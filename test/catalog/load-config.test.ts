// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${VAR} references are the subject of these tests.
import { readFileSync } from "node:fs";
import { truncate } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseAmount } from "../../src/billing/money.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { ConfigError, formatConfigProblem } from "../../src/catalog/config-error.ts";
import {
  createDefaultCatalog,
  DEFAULT_CATALOG_CREATED,
  DEFAULT_MODEL_ID,
} from "../../src/catalog/default-catalog.ts";
import type { LoadConfigOptions } from "../../src/catalog/load-config.ts";
import { type ConfigTestFolder, createConfigTestFolder, FILE_TIME_SECONDS } from "./config-test-folder.ts";

/** The example of SPEC §3, verbatim. */
const SPEC_EXAMPLE = `server: { host: 127.0.0.1, port: 8080, body_limit: 8mb }
database: sqlite:./data/tollgate.db        # or postgres://user@host/db
redis: redis://127.0.0.1:6379              # optional; shared rate limits and cache invalidation
admin_key: \${TOLLGATE_ADMIN_KEY}
models:
  - id: qwen3-0.6b                         # any string; may contain "/" and ":"
    kind: chat                             # chat | image | embedding
    owned_by: tollgate
    pricing: { input_per_million: "0.10", output_per_million: "0.40" }
    context_length: 8192
    engine: { type: llama, model: "hf:ORG/REPO:Q4_K_M", parallel: 4, max_queue: 64 }
  - id: gpt-4o-mini
    kind: chat
    pricing: { input_per_million: "0.15", output_per_million: "0.60" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1", api_key: "\${UPSTREAM_KEY}" } ]
      model: gpt-4o-mini
      fallbacks: [ qwen3-0.6b ]
  - id: text-embed-small
    kind: embedding
    pricing: { per_million: "0.02" }       # image and embedding models: one price per million tokens
`;

/** A minimal valid chat model entry, to build files around. */
const LOCAL_MODEL = `  - id: local
    pricing: { input_per_million: "0.10", output_per_million: "0.40" }
    engine: { type: llama, model: ./models/local.gguf }
`;

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

const load = (options?: LoadConfigOptions) => folder.load(options);
const problemsOf = (options?: LoadConfigOptions) => folder.problemsOf(options);

async function problemsOfFile(text: string, env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const file = await folder.write("tollgate.yaml", text);
  return problemsOf({ file, env });
}

describe("loadConfig: the SPEC §3 example", () => {
  it("loads every field, with defaults and ${VAR} applied", async () => {
    const file = await folder.write("tollgate.yaml", SPEC_EXAMPLE);
    const config = await load({ env: { UPSTREAM_KEY: "sk-upstream", TOLLGATE_ADMIN_KEY: "admin-secret" } });
    const expected: CatalogModel[] = [
      {
        id: "qwen3-0.6b",
        kind: "chat",
        ownedBy: "tollgate",
        pricing: { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.40" },
        contextLength: 8192,
        created: FILE_TIME_SECONDS,
        engine: {
          type: "llama",
          model: "hf:ORG/REPO:Q4_K_M",
          parallel: 4,
          maxQueue: 64,
          threads: undefined,
          gpu: "auto",
        },
      },
      {
        id: "gpt-4o-mini",
        kind: "chat",
        ownedBy: "tollgate",
        pricing: { kind: "chat", inputPerMillion: "0.15", outputPerMillion: "0.60" },
        contextLength: undefined,
        created: FILE_TIME_SECONDS,
        engine: {
          type: "openai",
          endpoints: [{ baseUrl: "https://api.example.com/v1", apiKey: "sk-upstream" }],
          model: "gpt-4o-mini",
          fallbacks: ["qwen3-0.6b"],
        },
      },
      {
        id: "text-embed-small",
        kind: "embedding",
        ownedBy: "tollgate",
        pricing: { kind: "flat", perMillion: "0.02" },
        contextLength: undefined,
        created: FILE_TIME_SECONDS,
        engine: undefined,
      },
    ];
    expect(config).toEqual({
      server: { host: "127.0.0.1", port: 8080, bodyLimitBytes: 8 * 1024 * 1024 },
      database: `sqlite:${join(folder.path, "data", "tollgate.db")}`,
      redis: "redis://127.0.0.1:6379",
      adminKey: "admin-secret",
      metricsKey: undefined,
      logPrompts: false,
      chargeJournalDir: join(folder.path, "data"),
      models: expected,
      builtInCatalog: false,
      source: file,
    });
  });
});

describe("loadConfig: the README's configuration example", () => {
  it("loads as written, with the settings its comments describe", async () => {
    const readme = readFileSync(join(import.meta.dirname, "../../README.md"), "utf8");
    const example = /## Configuration[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example, "README has a yaml block under ## Configuration").toBeDefined();
    await folder.write("tollgate.yaml", example ?? "");
    const config = await load({
      env: { TOLLGATE_ADMIN_KEY: "admin-secret", UPSTREAM_KEY: "sk-up", AZURE_OPENAI_KEY: "az-key" },
    });
    expect(config.models.map((model) => model.id)).toEqual(["qwen2.5-0.5b-instruct", "gpt-4o-mini"]);
    const upstream = config.models[1]?.engine;
    expect(upstream?.type === "openai" && upstream.endpoints).toEqual([
      { baseUrl: "https://api.example.com/v1", apiKey: "sk-up" },
      { baseUrl: "http://10.0.0.7:8000/v1", apiKey: undefined },
      {
        baseUrl: "https://my-resource.openai.azure.com/openai/v1",
        apiKey: undefined,
        headers: { "api-key": "az-key" },
      },
    ]);
    expect(upstream).toMatchObject({ fallbacks: ["qwen2.5-0.5b-instruct"], maxRetries: 2 });
  });
});

describe("loadConfig: which file", () => {
  it("uses the built-in defaults and catalogue when there is no file", async () => {
    const config = await load();
    expect(config).toEqual({
      server: { host: "127.0.0.1", port: 8080, bodyLimitBytes: 8_388_608 },
      database: `sqlite:${join(folder.path, "data", "tollgate.db")}`,
      redis: undefined,
      adminKey: undefined,
      metricsKey: undefined,
      logPrompts: false,
      chargeJournalDir: join(folder.path, "data"),
      models: createDefaultCatalog(),
      builtInCatalog: true,
      source: undefined,
    });
  });

  it("reads ./tollgate.yaml in the working folder when present", async () => {
    const file = await folder.write("tollgate.yaml", `server: { port: 9000 }\nmodels:\n${LOCAL_MODEL}`);
    const config = await load();
    expect(config.source).toBe(file);
    expect(config.server.port).toBe(9000);
  });

  it("prefers TOLLGATE_CONFIG to ./tollgate.yaml, and --config to both", async () => {
    await folder.write("tollgate.yaml", "server: { port: 1 }\nmodels: []\n");
    const fromEnvironment = await folder.write("other/env.yaml", "server: { port: 2 }\nmodels: []\n");
    const fromOption = await folder.write("other/option.yaml", "server: { port: 3 }\nmodels: []\n");
    expect((await load({ env: { TOLLGATE_CONFIG: "other/env.yaml" } })).source).toBe(fromEnvironment);
    const config = await load({ file: "other/option.yaml", env: { TOLLGATE_CONFIG: "other/env.yaml" } });
    expect(config.source).toBe(fromOption);
    expect(config.server.port).toBe(3);
  });

  it("fails when the file named by --config or TOLLGATE_CONFIG does not exist", async () => {
    expect(await problemsOf({ file: "nope.yaml" })).toEqual([
      ": does not exist (named by --config); check the path, or leave it out to use ./tollgate.yaml or the built-in catalogue",
    ]);
    const [problem] = await problemsOf({ env: { TOLLGATE_CONFIG: "missing.yaml" } });
    expect(problem).toContain("named by TOLLGATE_CONFIG");
  });

  it("fails when the named file is a folder", async () => {
    await folder.write("configs/readme.txt", "");
    expect((await problemsOf({ file: "configs" }))[0]).toContain("is a folder");
  });

  it("refuses a file larger than any catalogue needs before reading it (regression: read whole, then called not UTF-8)", async () => {
    const file = await folder.write("huge.yaml", "models: []\n");
    await truncate(file, 64 * 1024 * 1024 + 1);
    expect(await problemsOf({ file: "huge.yaml" })).toEqual([
      expect.stringContaining(": is larger than 64 MiB, more than any catalogue needs"),
    ]);
  });

  it("uses the built-in catalogue when the file has no models key, and none for an empty list", async () => {
    await folder.write("tollgate.yaml", "server: { port: 9000 }\n");
    expect((await load()).models).toEqual(createDefaultCatalog());
    await folder.write("tollgate.yaml", "models: []\n");
    expect((await load()).models).toEqual([]);
  });

  it("treats an empty file as all defaults", async () => {
    await folder.write("tollgate.yaml", "# nothing yet\n");
    const config = await load();
    expect(config.server).toEqual({ host: "127.0.0.1", port: 8080, bodyLimitBytes: 8_388_608 });
    expect(config.models.map((model) => model.id)).toEqual([DEFAULT_MODEL_ID]);
  });
});

describe("loadConfig: environment overrides", () => {
  const file = `server: { host: 0.0.0.0, port: 8081 }
database: sqlite:./file.db
redis: redis://file:6379
admin_key: from-file
models: []
`;

  it("replaces host, port, database, redis and admin key", async () => {
    await folder.write("config/tollgate.yaml", file);
    const config = await load({
      file: "config/tollgate.yaml",
      env: {
        HOST: "::1",
        PORT: "9999",
        TOLLGATE_DATABASE_URL: "sqlite:./env.db",
        TOLLGATE_REDIS_URL: "rediss://env:6380",
        TOLLGATE_ADMIN_KEY: "from-env",
      },
    });
    expect(config.server).toEqual({ host: "::1", port: 9999, bodyLimitBytes: 8_388_608 });
    // A relative path from the environment is relative to the working folder, not the file's.
    expect(config.database).toBe(`sqlite:${join(folder.path, "env.db")}`);
    expect(config.redis).toBe("rediss://env:6380");
    expect(config.adminKey).toBe("from-env");
    // Named for `serve` to warn about (a container image's variables beat a mounted config).
    expect(config.replacedByEnvironment).toEqual([
      "TOLLGATE_DATABASE_URL replaces database",
      "TOLLGATE_REDIS_URL replaces redis",
      "TOLLGATE_ADMIN_KEY replaces admin_key",
      "HOST replaces server.host",
      "PORT replaces server.port",
    ]);
  });

  it("reads log_level, which TOLLGATE_LOG_LEVEL replaces, and refuses a level pino does not have", async () => {
    const file = await folder.write("tollgate.yaml", "log_level: debug\nmodels: []\n");
    expect((await load({ file })).logLevel).toBe("debug");
    const replaced = await load({ file, env: { TOLLGATE_LOG_LEVEL: "WARN" } });
    expect(replaced.logLevel).toBe("warn");
    expect(replaced.replacedByEnvironment).toEqual(["TOLLGATE_LOG_LEVEL replaces log_level"]);
    expect((await load({ file: await folder.write("plain.yaml", "models: []\n") })).logLevel).toBeUndefined();
    expect(
      (await load({ file: await folder.write("upper.yaml", "log_level: ERROR\nmodels: []\n") })).logLevel,
    ).toBe("error");
    // An admin command does not log: a level it would not use does not stop it.
    expect((await load({ file, env: { TOLLGATE_LOG_LEVEL: "loud" }, purpose: "command" })).logLevel).toBe(
      "debug",
    );
    expect(await problemsOfFile("log_level: verbose\nmodels: []\n")).toEqual([
      'log_level: must be one of silent, fatal, error, warn, info, debug, trace (got "verbose")',
    ]);
    expect(await problemsOfFile("models: []\n", { TOLLGATE_LOG_LEVEL: "loud" })).toEqual([
      'TOLLGATE_LOG_LEVEL (environment): must be one of silent, fatal, error, warn, info, debug, trace (got "loud")',
    ]);
  });

  it("reads charge_journal_dir against the file's folder, TOLLGATE_CHARGE_JOURNAL_DIR against the working folder", async () => {
    const file = await folder.write("etc/tollgate.yaml", "charge_journal_dir: owed\nmodels: []\n");
    const elsewhere = join(folder.path, "elsewhere");
    expect((await load({ file, cwd: elsewhere })).chargeJournalDir).toBe(join(folder.path, "etc", "owed"));
    const replaced = await load({ file, cwd: elsewhere, env: { TOLLGATE_CHARGE_JOURNAL_DIR: "journal" } });
    expect(replaced.chargeJournalDir).toBe(join(elsewhere, "journal"));
    expect(replaced.replacedByEnvironment).toEqual([
      "TOLLGATE_CHARGE_JOURNAL_DIR replaces charge_journal_dir",
    ]);
    // Unset: ./data in the working folder, beside the default SQLite file.
    const plain = await folder.write("plain.yaml", "models: []\n");
    expect((await load({ file: plain, cwd: elsewhere })).chargeJournalDir).toBe(join(elsewhere, "data"));
    expect(await problemsOfFile("charge_journal_dir: [a]\nmodels: []\n")).toEqual([
      expect.stringMatching(/^charge_journal_dir: must be a string/),
    ]);
  });

  it("names no replacement where a variable repeats the file's value or the file has none", async () => {
    await folder.write("config/tollgate.yaml", "server: { port: 8081 }\nmodels: []\n");
    const config = await load({
      file: "config/tollgate.yaml",
      env: { PORT: "8081", TOLLGATE_REDIS_URL: "redis://env:6379" },
    });
    expect(config.redis).toBe("redis://env:6379");
    expect(config.replacedByEnvironment).toBeUndefined();
  });

  it("keeps the file's values when the variables are empty", async () => {
    await folder.write("config/tollgate.yaml", file);
    const config = await load({
      file: "config/tollgate.yaml",
      env: { HOST: "", PORT: "", TOLLGATE_ADMIN_KEY: "" },
    });
    expect(config.server.host).toBe("0.0.0.0");
    expect(config.server.port).toBe(8081);
    expect(config.adminKey).toBe("from-file");
    expect(config.database).toBe(`sqlite:${join(folder.path, "config", "file.db")}`);
  });

  it("applies to the built-in configuration too", async () => {
    const config = await load({
      env: { PORT: "0", TOLLGATE_DATABASE_URL: "postgres://user:pw@db/tollgate" },
    });
    expect(config.server.port).toBe(0);
    expect(config.database).toBe("postgres://user:pw@db/tollgate");
  });

  it("does not validate a file value that the environment replaces", async () => {
    await folder.write("tollgate.yaml", "database: mysql://nope\nserver: { port: huge }\nmodels: []\n");
    const config = await load({ env: { TOLLGATE_DATABASE_URL: "sqlite::memory:", PORT: "1234" } });
    expect(config.database).toBe("sqlite::memory:");
    expect(config.server.port).toBe(1234);
  });

  it("reports bad values by variable name, without repeating secrets", async () => {
    const problems = await problemsOf({
      env: { PORT: "80a", TOLLGATE_DATABASE_URL: "mysql://root:hunter2@db", TOLLGATE_REDIS_URL: "http://x" },
    });
    expect(problems).toEqual([
      'PORT (environment): must be an integer from 0 to 65535 (got "80a")',
      'TOLLGATE_DATABASE_URL (environment): must start with "sqlite:" or "postgres://"; write "sqlite:PATH" (such as "sqlite:./data/tollgate.db") or "postgres://user:password@host/db"',
      'TOLLGATE_REDIS_URL (environment): is not a Redis URL; write a URL such as "redis://127.0.0.1:6379" (or rediss:// for TLS)',
    ]);
    expect(problems.join("\n")).not.toContain("hunter2");
  });

  it("does not blame a valid file for the environment's values (regression: 'tollgate.yaml is not a valid ...')", async () => {
    const file = await folder.write("tollgate.yaml", "models: []\n");
    const error = (await load({ env: { PORT: "80a" } }).catch((caught: unknown) => caught)) as ConfigError;
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message.split("\n")[0]).toBe(
      `${file} with the environment's overrides is not a valid Tollgate configuration (1 problem):`,
    );
    await folder.write("tollgate.yaml", "models: []\nserver: { port: huge }\n");
    const both = (await load({ env: { TOLLGATE_LOG_LEVEL: "loud" } }).catch(
      (caught: unknown) => caught,
    )) as ConfigError;
    expect(both.message.split("\n")[0]).toBe(`${file} is not a valid Tollgate configuration (2 problems):`);
  });
});

describe("loadConfig: ${VAR}", () => {
  const upstream = (apiKey: string, baseUrl = "https://api.example.com/v1") => `models:
  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ { base_url: "${baseUrl}", api_key: "${apiKey}" } ]
`;

  it("reads variables from the environment, anywhere in a string", async () => {
    await folder.write("tollgate.yaml", upstream("${KEY_PREFIX}-${KEY}", "https://${UPSTREAM_HOST}/v1/"));
    const config = await load({ env: { KEY_PREFIX: "sk", KEY: "secret", UPSTREAM_HOST: "up.example" } });
    expect(config.models[0]?.engine).toEqual({
      type: "openai",
      endpoints: [{ baseUrl: "https://up.example/v1", apiKey: "sk-secret" }],
      model: "remote",
      fallbacks: [],
    });
  });

  it("names the variable and the field when a variable is not set", async () => {
    expect(await problemsOfFile(upstream("${UPSTREAM_KEY}"))).toEqual([
      "models[0].engine.endpoints[0].api_key: environment variable UPSTREAM_KEY is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file",
    ]);
  });

  // Regression: the variable was named first, and once set, the key was refused as unknown.
  it("refuses an unknown key whose value names a variable not set as unknown, not for the variable", async () => {
    const file = `extra: { inner: { deeper: "\${NOPE}" }, list: [ "\${NOPE}" ] }
host: { primary: "\${NOPE}" }
models:
  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1" } ]
      api_key: "\${NOPE}"
      extra: { token: "\${NOPE}" }
`;
    expect(await problemsOfFile(file)).toEqual([
      expect.stringMatching(/^extra: unknown key/),
      expect.stringMatching(/^host: belongs under server/),
      expect.stringMatching(/^models\[0\]\.engine\.api_key: unknown key/),
      expect.stringMatching(/^models\[0\]\.engine\.extra: unknown key/),
    ]);
  });

  it("lets admin_key and metrics_key resolve to nothing, meaning unset", async () => {
    await folder.write(
      "tollgate.yaml",
      "admin_key: ${TOLLGATE_ADMIN_KEY}\nmetrics_key: ${METRICS_KEY}\nmodels: []\n",
    );
    const config = await load();
    expect(config.adminKey).toBeUndefined();
    expect(config.metricsKey).toBeUndefined();
    // Said at start: an operator who forgot METRICS_KEY would not learn otherwise that /metrics is open.
    expect(config.unsetKeys).toEqual([
      "admin_key is ${TOLLGATE_ADMIN_KEY}, which is not set: the admin API takes only the stored admin keys",
      "metrics_key is ${METRICS_KEY}, which is not set: /metrics answers without a key",
    ]);
    const withKeys = await load({ env: { TOLLGATE_ADMIN_KEY: "a", METRICS_KEY: "m" } });
    expect(withKeys.adminKey).toBe("a");
    expect(withKeys.metricsKey).toBe("m");
    expect(withKeys.unsetKeys).toBeUndefined();
  });

  it("refuses admin_key or metrics_key that an unset variable is only part of (regression: the rest, a key anyone could guess, served without a word)", async () => {
    const text =
      'admin_key: "acme-production-admin-key-${ADMIN_SECRET}"\nmetrics_key: "scraper-${METRICS_SECRET}"\nmodels: []\n';
    expect(await problemsOfFile(text)).toEqual([
      expect.stringMatching(/^admin_key: environment variable ADMIN_SECRET is not set/),
      expect.stringMatching(/^metrics_key: environment variable METRICS_SECRET is not set/),
    ]);
    await folder.write("tollgate.yaml", text);
    const config = await load({
      env: { ADMIN_SECRET: "s3cret-admin-value-long-enough-to-pass", METRICS_SECRET: "m" },
    });
    expect(config.adminKey).toBe("acme-production-admin-key-s3cret-admin-value-long-enough-to-pass");
    expect(config.metricsKey).toBe("scraper-m");
  });

  it("reads a `__proto__` key as the unknown key it is, never as values the others inherit (regression: it priced a model at 0)", async () => {
    const problems = await problemsOfFile(`server: { __proto__: { port: 21115 } }
models:
  - id: a
    kind: chat
    __proto__: { pricing: { input_per_million: "0", output_per_million: "0" } }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ] }
valueOf: 1
`);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^server\.__proto__: unknown key/),
        expect.stringMatching(/^models\[0\]\.__proto__: unknown key/),
        expect.stringMatching(/^models\[0\]\.pricing: missing/),
        expect.stringMatching(/^valueOf: unknown key/),
      ]),
    );
    expect(problems.join("\n")).not.toContain("native code");
  });

  // Regression: `metrics_key: ""` left /metrics open without a word.
  it("says so when admin_key or metrics_key is written empty, meaning unset", async () => {
    for (const written of ['admin_key: ""\nmetrics_key: ""', "admin_key:\nmetrics_key: ~"]) {
      await folder.write("tollgate.yaml", `${written}\nmodels: []\n`);
      const config = await load();
      expect(config.metricsKey).toBeUndefined();
      expect(config.unsetKeys).toEqual([
        "admin_key is empty: the admin API takes only the stored admin keys",
        "metrics_key is empty: /metrics answers without a key",
      ]);
    }
  });

  it("writes $${ as a literal ${ and treats a variable set to empty as empty", async () => {
    await folder.write("tollgate.yaml", upstream("$${NOT_A_VARIABLE}${EMPTY}"));
    const config = await load({ env: { EMPTY: "" } });
    const engine = config.models[0]?.engine;
    expect(engine?.type === "openai" && engine.endpoints[0]?.apiKey).toBe("${NOT_A_VARIABLE}");
  });

  it("substitutes numbers given as strings, such as ports", async () => {
    await folder.write("tollgate.yaml", 'server: { port: "${APP_PORT}" }\nmodels: []\n');
    expect((await load({ env: { APP_PORT: "7000" } })).server.port).toBe(7000);
  });

  it("reports malformed references", async () => {
    expect(await problemsOfFile(upstream("${BROKEN"))).toEqual([
      'models[0].engine.endpoints[0].api_key: has "${" without a closing "}"; write ${NAME} to read an environment variable, or $${ for a literal "${"',
    ]);
    expect(await problemsOfFile(upstream("${1BAD}"))).toEqual([
      'models[0].engine.endpoints[0].api_key: "${1BAD}" is not an environment variable reference; names are letters, digits and _, such as ${UPSTREAM_KEY}',
    ]);
  });
});

describe("loadConfig: server, database and flags", () => {
  it.each([
    ["8mb", 8 * 1024 * 1024],
    ["512kb", 512 * 1024],
    ["256MB", 256 * 1024 ** 2],
    ["100b", 100],
    ["1048576", 1_048_576],
    [2048, 2048],
  ])("reads body_limit %j as %d bytes", async (bodyLimit, bytes) => {
    await folder.write("tollgate.yaml", `server: { body_limit: ${JSON.stringify(bodyLimit)} }\nmodels: []\n`);
    expect((await load()).server.bodyLimitBytes).toBe(bytes);
  });

  it("refuses a body_limit over 256mb (regression: 1gb taken, and a 600 MiB body answered 500)", async () => {
    for (const bodyLimit of ["1gb", "257mb", 268_435_457]) {
      expect(
        await problemsOfFile(`server: { body_limit: ${JSON.stringify(bodyLimit)} }\nmodels: []\n`),
      ).toEqual([
        `server.body_limit: must be at most 256mb (got ${JSON.stringify(bodyLimit)}): a body is read and parsed whole, in memory`,
      ]);
    }
  });

  it("resolves a relative SQLite path against the config file's folder", async () => {
    const file = await folder.write(
      "etc/tollgate/tollgate.yaml",
      "database: sqlite:store/t.db\nmodels: []\n",
    );
    const config = await load({ file, cwd: join(folder.path, "elsewhere") });
    expect(config.database).toBe(`sqlite:${join(folder.path, "etc", "tollgate", "store", "t.db")}`);
  });

  it("keeps absolute SQLite paths, :memory: and PostgreSQL URLs as written", async () => {
    for (const database of [
      "sqlite:/var/lib/tollgate.db",
      "sqlite::memory:",
      "postgres://u@h/db",
      "postgresql://h/db",
    ]) {
      await folder.write("tollgate.yaml", `database: "${database}"\nmodels: []\n`);
      expect((await load()).database).toBe(database);
    }
  });

  it("reads log_prompts and metrics_key", async () => {
    await folder.write("tollgate.yaml", "log_prompts: true\nmetrics_key: scrape-me\nmodels: []\n");
    const config = await load();
    expect(config.logPrompts).toBe(true);
    expect(config.metricsKey).toBe("scrape-me");
  });
});

describe("loadConfig: models", () => {
  it("resolves relative llama model paths against the config file's folder", async () => {
    const file = await folder.write(
      "deploy/tollgate.yaml",
      `models:
${LOCAL_MODEL}  - id: absolute
    pricing: { input_per_million: "0", output_per_million: "0" }
    engine: { type: llama, model: /srv/models/a.gguf }
  - id: remote-file
    pricing: { input_per_million: "0", output_per_million: "0" }
    engine: { type: llama, model: "https://example.com/m.gguf" }
  - id: hub
    pricing: { input_per_million: "0", output_per_million: "0" }
    engine: { type: llama, model: "hf:ORG/REPO:Q8_0" }
`,
    );
    const config = await load({ file, cwd: join(folder.path, "somewhere-else") });
    const paths = config.models.map((model) =>
      model.engine?.type === "llama" ? model.engine.model : undefined,
    );
    expect(paths).toEqual([
      join(folder.path, "deploy", "models", "local.gguf"),
      "/srv/models/a.gguf",
      "https://example.com/m.gguf",
      "hf:ORG/REPO:Q8_0",
    ]);
  });

  it("applies the llama engine defaults and reads its settings", async () => {
    await folder.write(
      "tollgate.yaml",
      `models:
${LOCAL_MODEL}  - id: tuned
    owned_by: me
    created: 1234
    pricing: { input_per_million: "0", output_per_million: "0" }
    engine: { type: llama, model: a.gguf, parallel: 64, max_queue: 0, threads: 3, gpu: false }
`,
    );
    const [local, tuned] = (await load()).models;
    expect(local?.engine).toEqual({
      type: "llama",
      model: join(folder.path, "models", "local.gguf"),
      parallel: 4,
      maxQueue: 64,
      threads: undefined,
      gpu: "auto",
    });
    expect(local?.kind).toBe("chat");
    expect(local?.ownedBy).toBe("tollgate");
    expect(tuned).toMatchObject({ ownedBy: "me", created: 1234 });
    expect(tuned?.engine).toEqual({
      type: "llama",
      model: join(folder.path, "a.gguf"),
      parallel: 64,
      maxQueue: 0,
      threads: 3,
      gpu: false,
    });
  });

  it("shares settings through YAML anchors under an ignored x- key", async () => {
    await folder.write(
      "tollgate.yaml",
      `x-local: &local { type: llama, parallel: 2, gpu: false }
x-prices: &prices { input_per_million: "0.5", output_per_million: "1" }
models:
  - { id: a, pricing: *prices, engine: { <<: *local, model: a.gguf } }
  - { id: b, pricing: *prices, engine: { <<: *local, model: b.gguf, parallel: 8 } }
`,
    );
    const engines = (await load()).models.map((model) => model.engine);
    expect(engines).toEqual([
      {
        type: "llama",
        model: join(folder.path, "a.gguf"),
        parallel: 2,
        maxQueue: 64,
        threads: undefined,
        gpu: false,
      },
      {
        type: "llama",
        model: join(folder.path, "b.gguf"),
        parallel: 8,
        maxQueue: 64,
        threads: undefined,
        gpu: false,
      },
    ]);
  });

  it("accepts ids with / and :", async () => {
    await folder.write(
      "tollgate.yaml",
      `models:
  - id: "org/model:q4"
    kind: image
    pricing: { per_million: "1.5" }
`,
    );
    expect((await load()).models[0]).toMatchObject({
      id: "org/model:q4",
      kind: "image",
      pricing: { kind: "flat", perMillion: "1.5" },
    });
  });

  it("rejects a fallback that names no model of the catalogue", async () => {
    const problems = await problemsOfFile(`models:
${LOCAL_MODEL}  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1" } ]
      fallbacks: [ locall, missing-model ]
`);
    expect(problems).toEqual([
      'models[1].engine.fallbacks[0]: "locall" is not a model in this catalogue; did you mean "local"?',
      'models[1].engine.fallbacks[1]: "missing-model" is not a model in this catalogue; name one of: local, remote',
    ]);
  });

  it("rejects a fallback to itself or to a model that is not a chat model", async () => {
    const problems = await problemsOfFile(`models:
  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1" } ]
      fallbacks: [ remote, embed ]
  - id: embed
    kind: embedding
    pricing: { per_million: "0.02" }
`);
    expect(problems).toEqual([
      "models[0].engine.fallbacks[0]: a model cannot fall back to itself; name another model",
      'models[0].engine.fallbacks[1]: "embed" is an embedding model; fallbacks must be chat models',
    ]);
  });

  it("rejects duplicate ids", async () => {
    const problems = await problemsOfFile(`models:
${LOCAL_MODEL}${LOCAL_MODEL}`);
    expect(problems).toEqual(['models[1].id: "local" is already the id of models[0]; ids must be unique']);
  });

  it("requires an engine for chat models and refuses one for other kinds", async () => {
    const problems = await problemsOfFile(`models:
  - id: chatty
    pricing: { input_per_million: "1", output_per_million: "2" }
  - id: pictures
    kind: image
    pricing: { per_million: "1" }
    engine: { type: llama, model: x.gguf }
`);
    expect(problems).toEqual([
      'models[0].engine: missing; chat models need an engine, such as { type: llama, model: "hf:ORG/REPO:Q4_K_M" } or { type: openai, endpoints: [ { base_url: "https://..." } ], model: NAME }',
      "models[1].engine: image models are not served by an engine yet; remove engine",
    ]);
  });

  it("keeps prices exactly as written, each a valid amount", async () => {
    await folder.write(
      "tollgate.yaml",
      `models:
  - id: precise
    pricing: { input_per_million: "0.000000001", output_per_million: "12.500" }
    engine: { type: llama, model: m.gguf }
`,
    );
    const pricing = (await load()).models[0]?.pricing;
    expect(pricing).toEqual({ kind: "chat", inputPerMillion: "0.000000001", outputPerMillion: "12.500" });
    expect(pricing?.kind === "chat" && parseAmount(pricing.outputPerMillion)).toBe(12_500_000_000n);
  });
});

describe("loadConfig: broken files", () => {
  it("lists every problem of a file at once, in file order, with field paths and fixes", async () => {
    const problems = await problemsOfFile(`server: { host: 127.0.0.1, prot: 8080, body_limit: 8 megs }
database: mysql://x
log_prompts: yes
models:
  - id: a
    pricing: { input_per_million: "0.15", output_per_million: "0.1.2" }
    engine: { type: llama, model: ./m.gguf, parallel: 0, gpu: true }
  - id: b
    kind: embeding
    pricing: { per_million: "1" }
  - id: c
    kind: embedding
    pricing: { input_per_million: "1" }
  - id: d
    pricing: { input_per_million: 0.1, output_per_million: "-1" }
    engine: { type: openai, endpoints: [], paralel: 3 }
  - id: e
    kind: image
    pricing: { per_million: "0.0000000001" }
  - id: f
    pricing: { input_per_million: "1e3", output_per_million: "1" }
    engine: { type: llama, modle: m.gguf, max_queue: 10001, threads: 0 }
`);
    expect(problems).toEqual([
      'server.prot: unknown key; did you mean "port"?',
      'server.body_limit: must be a size such as 8mb, 512kb or a number of bytes (got "8 megs")',
      'database: must start with "sqlite:" or "postgres://"; write "sqlite:PATH" (such as "sqlite:./data/tollgate.db") or "postgres://user:password@host/db"',
      'log_prompts: must be true or false (got "yes")',
      'models[0].pricing.output_per_million: "0.1.2" is not a decimal amount; write a price such as "0.15"',
      "models[0].engine.parallel: must be an integer from 1 to 64 (got 0)",
      'models[0].engine.gpu: must be "auto" (use a GPU when one is found) or false (CPU only) (got true)',
      'models[1].kind: must be one of chat, image, embedding (got "embeding"); did you mean "embedding"?',
      "models[2].pricing.input_per_million: embedding models have one price; write per_million instead",
      'models[2].pricing.per_million: missing; write a price per million tokens as a quoted decimal, such as "0.02"',
      'models[3].pricing.input_per_million: write the price as a quoted decimal string, such as "0.10" (got the number 0.1; YAML numbers are floating point and lose precision)',
      'models[3].pricing.output_per_million: "-1" is negative; prices are zero or more',
      "models[3].engine.paralel: unknown key; remove it (allowed here: type, endpoints, model, fallbacks, connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms, max_retries, cooldown_ms, max_connections)",
      'models[3].engine.endpoints: is empty; list at least one upstream server, such as [ { base_url: "https://api.example.com/v1", api_key: "${UPSTREAM_KEY}" } ]',
      'models[4].pricing.per_million: "0.0000000001" has more than 9 decimal places; the smallest price is "0.000000001"',
      'models[5].pricing.input_per_million: "1e3" uses an exponent; write the price out in full, such as "0.0000001" or "1000"',
      'models[5].engine.modle: unknown key; did you mean "model"?',
      'models[5].engine.model: missing; write a GGUF file path or a URI such as "hf:ORG/REPO:Q4_K_M"',
      "models[5].engine.max_queue: must be an integer from 0 to 10000 (got 10001)",
      "models[5].engine.threads: must be an integer from 1 to 1024 (got 0)",
    ]);
  });

  // Regression: /v1/models showed "007.50" and "0000" as written; a boolean was "a non-string value".
  it("keeps prices without leading zeros, their decimals as written, and names a value of another type", async () => {
    const config = await load({
      file: await folder.write(
        "tollgate.yaml",
        `models:
  - id: a
    pricing: { input_per_million: "007.50", output_per_million: "0000" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }
  - id: b
    pricing: { input_per_million: "0.10", output_per_million: "00.000000001" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }
`,
      ),
    });
    expect(config.models.map((model) => model.pricing)).toEqual([
      { kind: "chat", inputPerMillion: "7.50", outputPerMillion: "0" },
      { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.000000001" },
    ]);
    expect(
      await problemsOfFile(`models:
  - id: a
    pricing: { input_per_million: true, output_per_million: [1] }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }
`),
    ).toEqual([
      'models[0].pricing.input_per_million: write the price as a quoted decimal string, such as "0.10" (got true)',
      'models[0].pricing.output_per_million: write the price as a quoted decimal string, such as "0.40" (got a list)',
    ]);
  });

  it("gives each problem the line of its field and lists them all in the message", async () => {
    const file = await folder.write(
      "tollgate.yaml",
      `models:
  - id: x
    pricing:
      input_per_million: "0.1.2"
      output_per_million: "1"
    engine: { type: llama, model: m.gguf, parallel: 0 }
`,
    );
    const error = await load().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    const configError = error as ConfigError;
    expect(configError.source).toBe(file);
    expect(configError.problems.map((problem) => problem.line)).toEqual([4, 6]);
    expect(configError.message).toBe(
      `${file} is not a valid Tollgate configuration (2 problems):
  - models[0].pricing.input_per_million: "0.1.2" is not a decimal amount; write a price such as "0.15" (line 4)
  - models[0].engine.parallel: must be an integer from 1 to 64 (got 0) (line 6)`,
    );
  });

  it("reports a YAML syntax error with its line and column", async () => {
    const file = await folder.write("tollgate.yaml", "server:\n  port: 8080\nmodels: [ { id: a\n");
    const error = (await load({ file }).catch((caught: unknown) => caught)) as ConfigError;
    expect(error).toBeInstanceOf(ConfigError);
    const [problem] = error.problems;
    expect(problem?.line).toBe(4);
    expect(problem?.column).toBe(1);
    expect(formatConfigProblem(problem!)).toMatch(/^line 4, column 1: YAML syntax error: /);
    expect(error.message).toContain("line 4, column 1");
  });

  it("shows the line of a YAML syntax error with its values masked, the caret where the problem is", async () => {
    const file = await folder.write(
      "tollgate.yaml",
      `models:
  - id: remote
    engine:
      type: openai
      endpoints:
        - base_url: https://api.example.com/v1
          headers: { X-Api-Key: plain-secret-1 }
          api_key: "sk-upstream-secret-2" "oops" # was https://user:hunter2@example.com
`,
    );
    const error = (await load({ file }).catch((caught: unknown) => caught)) as ConfigError;
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).not.toMatch(/hunter2|plain-secret-1|sk-upstream-secret-2|oops/);
    const [problem] = error.problems;
    const [, quoted, caret] = problem?.message.split("\n") ?? [];
    expect(quoted).toBe(
      `          api_key: "${"*".repeat(20)}" "****" #${"*".repeat(" was https://user:hunter2@example.com".length)}`,
    );
    expect(caret?.indexOf("^")).toBe((problem?.column ?? 0) - 1);
    expect(quoted?.[(problem?.column ?? 0) - 1]).toBe('"');
  });

  it("reports a duplicate key as a YAML error at its line", async () => {
    const problems = await load({
      file: await folder.write("tollgate.yaml", "models: []\nredis: redis://a\nredis: redis://b\n"),
    }).catch((caught: ConfigError) => caught.problems);
    expect(Array.isArray(problems) && problems[0]).toMatchObject({ line: 3, column: 1 });
    expect(Array.isArray(problems) && problems[0]?.message).toContain("Map keys must be unique");
  });

  it("rejects a file that is not a mapping", async () => {
    expect(await problemsOfFile("- a\n- b\n")).toEqual([
      ": the file must be a YAML mapping with keys such as server, database and models (got a list)",
    ]);
  });

  it("suggests the right place for misplaced and misspelled top-level keys", async () => {
    expect(await problemsOfFile("port: 80\nmodel: []\nadminKey: x\n")).toEqual([
      "port: belongs under server; write server: { port: ... }",
      'model: unknown key; did you mean "models"?',
      'adminKey: unknown key; did you mean "admin_key"?',
    ]);
  });

  // Regression: "unknown key; remove it", with no word of the variable that sets them.
  it("names the environment variable of a setting read from the environment only", async () => {
    expect(await problemsOfFile("models: []\nmodels_dir: /srv/models\nreplica_id: a\n")).toEqual([
      "models_dir: is set by the environment variable TOLLGATE_MODELS_DIR, not in the config file; remove it here and set TOLLGATE_MODELS_DIR instead",
      "replica_id: is set by the environment variable TOLLGATE_REPLICA_ID, not in the config file; remove it here and set TOLLGATE_REPLICA_ID instead",
    ]);
  });

  it("rejects unknown engine types and keys of the other engine type", async () => {
    expect(
      await problemsOfFile(`models:
  - id: a
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: vllm, model: x }
  - id: b
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: llama, model: x.gguf, fallbacks: [ a ] }
  - id: c
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: openai, endpoints: [ { base_url: "ftp://x", apikey: k } ], threads: 2 }
  - id: d
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: openai, endpoints: [ { base_url: "https://user:s3cret@api.example.com/v1" } ] }
`),
    ).toEqual([
      'models[0].engine.type: must be one of llama, openai (got "vllm")',
      "models[1].engine.fallbacks: belongs to type: openai engines; a llama engine has no fallbacks",
      "models[2].engine.threads: belongs to type: llama engines",
      'models[2].engine.endpoints[0].apikey: unknown key; did you mean "api_key"?',
      'models[2].engine.endpoints[0].base_url: is not an http(s) URL; write the server\'s API root, such as "https://api.example.com/v1"',
      "models[3].engine.endpoints[0].base_url: carries credentials (user:password@), which are not sent; give the server's key as api_key",
    ]);
  });

  it("says where an engine setting written inside an endpoint goes (regression: 'remove it')", async () => {
    expect(
      await problemsOfFile(`models:
  - id: a
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1", max_connections: 4, idle_timeout_ms: 5 } ]
`),
    ).toEqual([
      "models[0].engine.endpoints[0].max_connections: belongs to the engine, not to one endpoint; move it beside endpoints: it bounds each endpoint's connections",
      "models[0].engine.endpoints[0].idle_timeout_ms: belongs to the engine, not to one endpoint; move it beside endpoints: it applies to every endpoint",
    ]);
  });

  it("rejects bad model sources, ids and numbers", async () => {
    expect(
      await problemsOfFile(`models:
  - id: 42
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: llama, model: "s3://bucket/m.gguf" }
  - pricing: { input_per_million: "1", output_per_million: "1" }
    context_length: 0
    engine: { type: llama, model: "hf:just-a-name" }
  - id: 3.10
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: llama, model: "./m.gguf" }
`),
    ).toEqual([
      'models[0].id: must be a string; quote it: "42"',
      'models[0].engine.model: "s3:" is not a supported model source; write a file path, "hf:ORG/REPO:QUANT" or an http(s):// URL',
      'models[1].id: missing; give each model a unique id, such as "qwen2.5-0.5b-instruct"',
      "models[1].context_length: must be a positive integer (got 0)",
      'models[1].engine.model: "hf:just-a-name" is not a Hugging Face model URI; write hf:ORG/REPO:QUANT, such as "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"',
      // YAML read 3.10 as the number 3.1: suggesting "3.1" would be another id.
      "models[2].id: must be a string; put the id in quotes as you wrote it",
    ]);
  });

  it("rejects an id that begins or ends with whitespace, which a key's model list would trim into another", async () => {
    expect(
      await problemsOfFile(`models:
  - id: " lead"
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: lead }
  - id: "trail\\t"
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: trail }
  - id: "with space"
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: inner }
`),
    ).toEqual([
      'models[0].id: must not begin or end with whitespace; write "lead"',
      'models[1].id: must not begin or end with whitespace; write "trail"',
    ]);
  });

  it("rejects an id that GET /v1/models/{id} could not name written out (regression: 'a//b' and 'x/' were served, found only percent-encoded)", async () => {
    const entry = (id: string) => `  - id: "${id}"
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }
`;
    expect(
      await problemsOfFile(
        `models:\n${["a//b", "x/", "/lead", "org/./m", "..", "org/model:Q4", "a.b/c..d"].map(entry).join("")}`,
      ),
    ).toEqual(
      [
        ["0", "a/b"],
        ["1", "x"],
        ["2", "lead"],
        ["3", "org/m"],
        ["4", ""],
      ].map(
        ([index, suggestion]) =>
          `models[${index}].id: must not begin or end with "/" nor have an empty, "." or ".." part between slashes: GET /v1/models/{id} could not name it (the server joins repeated slashes, clients resolve dot parts)${suggestion === "" ? "" : `; write "${suggestion}"`}`,
      ),
    );
  });

  it("takes the hf: scheme in any case", async () => {
    await folder.write(
      "tollgate.yaml",
      `models:
  - id: shouted
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: llama, model: "HF:org/repo:Q4_K_M" }
`,
    );
    const config = await load();
    expect(config.models[0]?.engine).toMatchObject({ type: "llama", model: "HF:org/repo:Q4_K_M" });
  });

  it("never repeats secrets in messages", async () => {
    // A key written without quotes is a number to YAML, and no less secret.
    const problems = await problemsOfFile(`admin_key: 8472619305517
database: "postgres://user:hunter2@[bad"
models: []
`);
    expect(problems.join("\n")).not.toContain("8472619305517");
    expect(problems).toEqual([
      'admin_key: must be a string such as "${TOLLGATE_ADMIN_KEY}" (got a number)',
      'database: is not a valid PostgreSQL URL; write "sqlite:PATH" (such as "sqlite:./data/tollgate.db") or "postgres://user:password@host/db"',
    ]);
  });
});

describe("loadConfig: upstream endpoint headers and keys", () => {
  const upstream = (endpoint: string) => `models:
  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ ${endpoint} ]
`;

  it("reads an endpoint's headers, lower-cased, with variables; an empty value sends none", async () => {
    await folder.write(
      "tollgate.yaml",
      upstream(
        '{ base_url: "https://res.example.com/openai/v1", headers: { Api-Key: "${AZURE_KEY}", X-Title: Tollgate, X-Optional: "${UNSET_HERE}" } }',
      ),
    );
    const config = await load({ env: { AZURE_KEY: "az-secret", UNSET_HERE: "" } });
    expect(config.models[0]?.engine).toEqual({
      type: "openai",
      endpoints: [
        {
          baseUrl: "https://res.example.com/openai/v1",
          apiKey: undefined,
          headers: { "api-key": "az-secret", "x-title": "Tollgate" },
        },
      ],
      model: "remote",
      fallbacks: [],
    });
  });

  it("keeps a header whatever its name (regression: one named __proto__ dropped without a word)", async () => {
    await folder.write(
      "tollgate.yaml",
      upstream('{ base_url: "https://gw.example.com/v1", headers: { __proto__: "y", constructor: "z" } }'),
    );
    const engine = (await load()).models[0]?.engine as { endpoints: { headers: Record<string, string> }[] };
    expect(Object.entries(engine.endpoints[0]?.headers ?? {})).toEqual([
      ["__proto__", "y"],
      ["constructor", "z"],
    ]);
  });

  it("takes authorization from headers when there is no api_key", async () => {
    await folder.write(
      "tollgate.yaml",
      upstream('{ base_url: "https://gw.example.com/v1", headers: { Authorization: "Token abc" } }'),
    );
    const engine = (await load()).models[0]?.engine;
    expect(engine?.type === "openai" && engine.endpoints[0]?.headers).toEqual({ authorization: "Token abc" });
  });

  it("refuses bad header names, duplicates, headers Tollgate sets, and missing or non-string values", async () => {
    const problems = await problemsOfFile(
      upstream(`{ base_url: "https://x.example/v1", api_key: k, headers: {
        "Bad Name": a, X-Key: "1", x-key: "2", Content-Type: text/plain, Host: evil.example,
        Authorization: "Bearer other", X-Empty: , X-Count: 5 } }`),
    );
    expect(problems).toEqual([
      'models[0].engine.endpoints[0].headers["Bad Name"]: is not a valid header name; use letters, digits and -, such as X-Api-Key',
      "models[0].engine.endpoints[0].headers.x-key: is given twice (header names ignore case); keep one",
      "models[0].engine.endpoints[0].headers.Content-Type: is set by Tollgate itself; remove it",
      "models[0].engine.endpoints[0].headers.Host: is set by Tollgate itself; remove it",
      "models[0].engine.endpoints[0].headers.Authorization: would replace the api_key's Authorization header; give one of the two",
      'models[0].engine.endpoints[0].headers.X-Empty: has no value; write one, such as "${UPSTREAM_HEADER}"',
      'models[0].engine.endpoints[0].headers.X-Count: must be a string such as "${UPSTREAM_HEADER}" (quote numbers) (got a number)',
    ]);
  });

  it("refuses keys and header values that HTTP cannot carry, without repeating them", async () => {
    const problems = await problemsOfFile(
      upstream(
        '{ base_url: "https://x.example/v1", api_key: "${KEY_FROM_FILE}", headers: { X-Key: "${HEADER_VALUE}" } }, { base_url: "https://y.example/v1", api_key: " spaced-secret " }, { base_url: "https://z.example/v1", api_key: "sk-€uro-secret", headers: { X-Latin: "café" } }',
      ),
      { KEY_FROM_FILE: "file-secret\n", HEADER_VALUE: "head\r\nX-Injected: 1" },
    );
    expect(problems).toEqual([
      "models[0].engine.endpoints[0].api_key: contains a line break or another control character, which HTTP headers cannot carry (often a trailing newline copied from a file); remove it",
      "models[0].engine.endpoints[0].headers.X-Key: contains a line break or another control character, which HTTP headers cannot carry (often a trailing newline copied from a file); remove it",
      "models[0].engine.endpoints[1].api_key: starts or ends with spaces, which HTTP drops from header values; remove them",
      // Regression: taken, then every request failed as if the upstream could not be reached.
      "models[0].engine.endpoints[2].api_key: has a character beyond Latin-1 (such as € or a letter of another script), which HTTP headers cannot carry; use the value as the provider gave it, or percent-encode what the upstream decodes",
    ]);
    expect(problems.join("\n")).not.toMatch(/file-secret|spaced-secret|Injected|uro-secret/);
  });

  it("refuses an admin or metrics key that no request could present", async () => {
    expect(
      await problemsOfFile('admin_key: "${ADMIN_FROM_FILE}"\nmetrics_key: " m "\nmodels: []\n', {
        ADMIN_FROM_FILE: "admin-secret\n",
      }),
    ).toEqual([
      "admin_key: contains a line break or another control character, which HTTP headers cannot carry (often a trailing newline copied from a file); remove it",
      "metrics_key: starts or ends with spaces, which HTTP drops from header values; remove them",
    ]);
    await folder.write("tollgate.yaml", "models: []\n");
    expect(await problemsOf({ env: { TOLLGATE_ADMIN_KEY: "admin-secret\r\n" } })).toEqual([
      "TOLLGATE_ADMIN_KEY (environment): contains a line break or another control character, which HTTP headers cannot carry (often a trailing newline copied from a file); remove it",
    ]);
  });

  it("refuses an admin or metrics key with characters outside ASCII, which no request could match", async () => {
    const outsideAscii =
      "has characters outside ASCII, which HTTP clients send in another encoding than the server compares: no request could use it; use ASCII letters, digits and punctuation";
    expect(
      await problemsOfFile(
        'admin_key: "clé-d-administration-123"\nmetrics_key: "clé-des-métriques"\nmodels: []\n',
      ),
    ).toEqual([`admin_key: ${outsideAscii}`, `metrics_key: ${outsideAscii}`]);
    await folder.write("tollgate.yaml", "models: []\n");
    expect(await problemsOf({ env: { TOLLGATE_ADMIN_KEY: "clé-d-administration-123" } })).toEqual([
      `TOLLGATE_ADMIN_KEY (environment): ${outsideAscii}`,
    ]);
  });
});

describe("loadConfig for CLI commands", () => {
  const file = `server: { port: 8080 }
models:
  - id: remote
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine:
      type: openai
      endpoints: [ { base_url: "https://api.example.com/v1", api_key: "\${UPSTREAM_KEY}", headers: { X-Gateway-Key: "\${GATEWAY_KEY}" } } ]
`;

  it("needs none of the server's upstream secrets, nor a valid HOST or PORT", async () => {
    await folder.write("tollgate.yaml", file);
    const env = { PORT: "99999", HOST: " " };
    expect(await problemsOf({ env })).toEqual([
      "models[0].engine.endpoints[0].api_key: environment variable UPSTREAM_KEY is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file",
      "models[0].engine.endpoints[0].headers.X-Gateway-Key: environment variable GATEWAY_KEY is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file",
      'PORT (environment): must be an integer from 0 to 65535 (got "99999")',
    ]);
    const config = await load({ env, purpose: "command" });
    expect(config.models.map((model) => model.id)).toEqual(["remote"]);
    expect(config.models[0]?.engine).toMatchObject({ endpoints: [{ apiKey: undefined }] });
    expect(config.server.port).toBe(8080);
  });

  it('is not stopped by what only serve uses (regression: port: "${PORT}" stopped every command in a shell without PORT)', async () => {
    await folder.write(
      "tollgate.yaml",
      file.replace(
        "server: { port: 8080 }",
        'server: { port: "${PORT}", hots: x }\nlog_level: "${LL}"\nlog_prompts: "${LP}"',
      ),
    );
    for (const env of [{ UPSTREAM_KEY: "k" }, { PORT: "abc", LL: "loud", LP: "maybe" }]) {
      const config = await load({ env, purpose: "command" });
      expect(config.models.map((model) => model.id)).toEqual(["remote"]);
    }
    // serve still refuses each of them.
    expect(await problemsOf({ env: { UPSTREAM_KEY: "k", GATEWAY_KEY: "g" } })).toHaveLength(4);
  });

  it('needs no upstream secret that an unset variable is part of (regression: "Bearer ${UPSTREAM_KEY}" left "Bearer ", refused for its space)', async () => {
    await folder.write(
      "tollgate.yaml",
      file
        .replace('api_key: "${UPSTREAM_KEY}"', 'api_key: "Bearer ${UPSTREAM_KEY}"')
        .replace('X-Gateway-Key: "${GATEWAY_KEY}"', 'authorization: "Bearer ${GATEWAY_KEY}"'),
    );
    const config = await load({ env: {}, purpose: "command" });
    expect(config.models[0]?.engine).toMatchObject({ endpoints: [{ apiKey: undefined }] });
    expect(await problemsOf({ env: {} })).toHaveLength(2);
  });

  it("still needs every other variable, and reports one that is not set once (not also as an empty value)", async () => {
    await folder.write("tollgate.yaml", file.replace("https://api.example.com/v1", "${UPSTREAM_URL}"));
    expect(await problemsOf({ env: { UPSTREAM_KEY: "k" }, purpose: "command" })).toEqual([
      "models[0].engine.endpoints[0].base_url: environment variable UPSTREAM_URL is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file",
    ]);
  });
});

describe("the built-in catalogue", () => {
  it("has one small local chat model with valid prices", () => {
    const [model, ...others] = createDefaultCatalog();
    expect(others).toEqual([]);
    expect(model).toEqual({
      id: "qwen2.5-0.5b-instruct",
      kind: "chat",
      ownedBy: "tollgate",
      pricing: { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.40" },
      contextLength: 8192,
      created: DEFAULT_CATALOG_CREATED,
      engine: {
        type: "llama",
        model: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
        parallel: 4,
        maxQueue: 64,
        threads: undefined,
        gpu: "auto",
      },
    });
    expect(parseAmount("0.10")).toBe(100_000_000n);
  });

  it("is a fresh copy each time", () => {
    const first = createDefaultCatalog();
    first[0]!.id = "changed";
    expect(createDefaultCatalog()[0]?.id).toBe(DEFAULT_MODEL_ID);
  });
});

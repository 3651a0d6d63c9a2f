/**
 * Tollgate as the benchmark runs it, in its own process:
 * `node bench/gateway/tollgate-gateway.ts UPSTREAM_BASE_URL [--no-limits]` starts a server on a
 * fresh SQLite file with the catalogue below, makes a key on the starter account (with rpm and
 * tpm limits far above what the benchmark sends, so the limiter runs on every request without
 * refusing any; `--no-limits` leaves them out) and prints `{"port", "key", "limits"}`.
 *
 * `bench` routes to the mock's fast answers, `bench-paced` to its paced stream (upstream model
 * `paced`). Prices are tiny so the starter balance lasts the whole run.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKey } from "../../src/admin/create-key.ts";
import { loadConfig } from "../../src/catalog/load-config.ts";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";

const [upstream, ...flags] = process.argv.slice(2);
if (upstream === undefined) throw new Error("usage: tollgate-gateway.ts UPSTREAM_BASE_URL [--no-limits]");
const limits = !flags.includes("--no-limits");

const folder = mkdtempSync(join(tmpdir(), "tollgate-bench-"));
const configFile = join(folder, "tollgate.yaml");
writeFileSync(
  configFile,
  `server: { host: 127.0.0.1, port: 0 }
database: "sqlite:${join(folder, "tollgate.db")}"
models:
  - id: bench
    kind: chat
    pricing: { input_per_million: "0.000001", output_per_million: "0.000001" }
    engine: { type: openai, endpoints: [ { base_url: "${upstream}" } ], model: bench }
  - id: bench-paced
    kind: chat
    pricing: { input_per_million: "0.000001", output_per_million: "0.000001" }
    engine: { type: openai, endpoints: [ { base_url: "${upstream}" } ], model: paced }
`,
);
const config = await loadConfig({ file: configFile });
const server = await startServer({ config, logger: false, port: 0 });
const store = await openStore(config.database);
const starter = await store.getAccountByName("starter");
if (starter === undefined) throw new Error("the first start made no starter account");
const { key } = await createKey(store, {
  role: "user",
  accountId: starter.id,
  name: "bench",
  ...(limits ? { rpm: 100_000_000, tpm: 1_000_000_000 } : {}),
});
await store.close();

const port = Number(new URL(server.baseUrl).port);
process.stdout.write(`${JSON.stringify({ port, key, limits })}\n`);

const stop = async () => {
  await server.close();
  rmSync(folder, { recursive: true, force: true });
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());

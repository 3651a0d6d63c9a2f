/**
 * The load loop used where `wrk` is not installed, run in its own process by load-generator.ts:
 * `connections` clients each send requests one after another over a keep-alive pool until the
 * time is up, then it prints a LoadResult as JSON.
 */
import { Pool } from "undici";
import type { LoadOptions, LoadResult } from "./load-generator.ts";

const options = JSON.parse(process.argv[2] ?? "{}") as LoadOptions;
const url = new URL(options.url);
const pool = new Pool(url.origin, { connections: options.connections, pipelining: 1 });
const latencies: number[] = [];
let errors = 0;
const started = performance.now();
const deadline = started + options.durationSeconds * 1000;

async function client(): Promise<void> {
  while (performance.now() < deadline) {
    const sent = performance.now();
    try {
      const response = await pool.request({
        method: "POST",
        path: url.pathname,
        headers: options.headers,
        body: options.body,
      });
      for await (const _ of response.body) {
        // drain
      }
      if (response.statusCode >= 400) errors++;
      latencies.push(performance.now() - sent);
    } catch {
      errors++;
    }
  }
}

await Promise.all(Array.from({ length: options.connections }, () => client()));
const elapsed = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const percentile = (fraction: number) =>
  latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * fraction))] ?? 0;
const result: LoadResult = {
  requests: latencies.length,
  requestsPerSecond: latencies.length / elapsed,
  errors,
  p50Ms: percentile(0.5),
  p99Ms: percentile(0.99),
};
process.stdout.write(`${JSON.stringify(result)}\n`);
await pool.close();

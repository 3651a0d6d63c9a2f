/**
 * Drives load at one URL for a fixed time: `wrk` (Debian's package) when it is installed, else
 * an undici load loop in a child process (load-worker.ts). Both report the same summary.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface LoadOptions {
  url: string;
  connections: number;
  durationSeconds: number;
  body: string;
  headers: Record<string, string>;
  /** CPU list for `taskset` (the load generator's core), or `undefined` for no pinning. */
  cpus: string | undefined;
}

export interface LoadResult {
  requests: number;
  requestsPerSecond: number;
  /** Connection, read, write and timeout errors plus non-2xx answers. */
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

export type LoadGenerator = "wrk" | "undici";

/** `wrk` when it runs here, else the undici loop. */
export function chooseLoadGenerator(): LoadGenerator {
  const probe = spawnSync("wrk", ["--version"], { encoding: "utf8" });
  return probe.error === undefined && `${probe.stdout}${probe.stderr}`.includes("wrk") ? "wrk" : "undici";
}

export async function runLoad(generator: LoadGenerator, options: LoadOptions): Promise<LoadResult> {
  return generator === "wrk" ? runWrk(options) : runWorker(options);
}

const scriptFolder = mkdtempSync(join(tmpdir(), "tollgate-bench-wrk-"));
let scriptCount = 0;

function luaString(text: string): string {
  return `[==[${text}]==]`;
}

async function runWrk(options: LoadOptions): Promise<LoadResult> {
  const script = join(scriptFolder, `load-${scriptCount++}.lua`);
  writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      `wrk.body = ${luaString(options.body)}`,
      ...Object.entries(options.headers).map(
        ([name, value]) => `wrk.headers[ ${luaString(name)} ] = ${luaString(value)}`,
      ),
      "done = function(summary, latency, requests)",
      "  local e = summary.errors",
      '  io.write(string.format(\'{"requests":%d,"durationUs":%d,"errors":%d,"p50Us":%d,"p99Us":%d}\\n\',',
      "    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout + e.status,",
      "    math.floor(latency:percentile(50)), math.floor(latency:percentile(99))))",
      "end",
    ].join("\n"),
  );
  const wrkArguments = [
    "-t1",
    `-c${options.connections}`,
    `-d${options.durationSeconds}s`,
    "--timeout",
    "10s",
    "-s",
    script,
    options.url,
  ];
  const [command, commandArguments] =
    options.cpus === undefined
      ? ["wrk", wrkArguments]
      : ["taskset", ["-c", options.cpus, "wrk", ...wrkArguments]];
  const { stdout } = await run(command, commandArguments, { maxBuffer: 1024 * 1024 });
  const line = stdout.split("\n").find((candidate) => candidate.startsWith('{"requests"'));
  if (line === undefined) throw new Error(`wrk printed no summary:\n${stdout}`);
  const summary = JSON.parse(line) as {
    requests: number;
    durationUs: number;
    errors: number;
    p50Us: number;
    p99Us: number;
  };
  return {
    requests: summary.requests,
    requestsPerSecond: summary.requests / (summary.durationUs / 1e6),
    errors: summary.errors,
    p50Ms: summary.p50Us / 1000,
    p99Ms: summary.p99Us / 1000,
  };
}

async function runWorker(options: LoadOptions): Promise<LoadResult> {
  const worker = new URL("./load-worker.ts", import.meta.url).pathname;
  const nodeArguments = [worker, JSON.stringify(options)];
  const [command, commandArguments] =
    options.cpus === undefined
      ? [process.execPath, nodeArguments]
      : ["taskset", ["-c", options.cpus, process.execPath, ...nodeArguments]];
  const { stdout } = await run(command, commandArguments, { maxBuffer: 1024 * 1024 });
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as LoadResult;
}

/**
 * `npm run bench -- instructions [--requests=N] [--warm-up=N] [--connections=N]`
 *
 * The gateway's cost per request as a count of machine instructions, which does not depend on
 * what else the machine is doing: wall-clock figures on a shared machine swing by a factor of two
 * between runs, instruction counts repeat to about 1 % (the garbage collector's share less so).
 * Each gateway (the featureless proxy, then Tollgate with auth, limits and billing on) runs under
 * valgrind's callgrind against the gateway benchmark's fast mock upstream; after `--warm-up`
 * requests (default 12000: with 3000, V8's optimizing compiler was still at work on both gateways,
 * a tenth of what was counted) counting is switched on for `--requests` more (default 4000) at
 * `--connections` (default 8). The table gives instructions per request, split into the garbage
 * collector's, the JIT compilers' and the rest (the request path itself: the figure to compare
 * when the garbage collector's share swings between runs), and the ratio to the proxy. Needs
 * `valgrind` (Debian's package); about 8 minutes.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Pool } from "undici";
import {
  startFeaturelessProxy,
  startMockUpstream,
  startTollgate,
  type Target,
} from "../gateway/gateway-targets.ts";

const execute = promisify(execFile);

interface Options {
  requests: number;
  warmUp: number;
  connections: number;
}

function parseOptions(args: readonly string[]): Options {
  const options: Options = { requests: 4000, warmUp: 12_000, connections: 8 };
  for (const arg of args) {
    const [name, value] = arg.split("=", 2);
    const number = Number(value);
    if (!Number.isSafeInteger(number) || number <= 0)
      throw new Error(`${arg}: expected --name=POSITIVE_INTEGER`);
    if (name === "--requests") options.requests = number;
    else if (name === "--warm-up") options.warmUp = number;
    else if (name === "--connections") options.connections = number;
    else throw new Error(`unknown option ${arg}; use --requests=N, --warm-up=N, --connections=N`);
  }
  return options;
}

/** How many requests failed, and what the first failure answered. */
interface Failures {
  count: number;
  first: string | undefined;
}

/** Sends `count` non-streamed requests, `connections` at a time; tells which failed. */
async function sendRequests(target: Target, count: number, connections: number): Promise<Failures> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin, { connections });
  const body = JSON.stringify({
    model: target.model("fast"),
    messages: [{ role: "user", content: "Say five words." }],
    max_tokens: 5,
  });
  let left = count;
  const failed: Failures = { count: 0, first: undefined };
  const loop = async () => {
    while (left-- > 0) {
      const response = await pool.request({
        method: "POST",
        path: url.pathname,
        headers: target.headers,
        body,
      });
      const text = await response.body.text();
      if (response.statusCode === 200) continue;
      failed.count++;
      failed.first ??= `${response.statusCode} ${text.slice(0, 300)}`;
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  await pool.close();
  return failed;
}

/** Instructions counted, in all and in the parts the table shows. */
interface Counts {
  total: number;
  garbageCollector: number;
  compiler: number;
}

/** V8's garbage collector, by the C++ names of its parts. */
const GARBAGE_COLLECTOR =
  /Scaveng|Marking|MarkCompact|Sweep|Evacuat|heap::base::|v8::internal::Heap::|MemoryAllocator|ArrayBufferSweeper|Compactor|v8::internal::MinorMS/;
/** V8's optimizing compilers (Turbofan, Turboshaft, Maglev) and its bytecode generator. */
const COMPILER =
  /v8::internal::compiler::|v8::internal::maglev::|turboshaft|v8::internal::interpreter::Bytecode(Generator|ArrayBuilder)/;

/**
 * What callgrind counted in the dump files of `prefix` (one per dump and thread), in all and for
 * the functions of the garbage collector and of the compilers (self cost, from callgrind_annotate).
 */
async function readCounts(folder: string, prefix: string): Promise<Counts> {
  const counts: Counts = { total: 0, garbageCollector: 0, compiler: 0 };
  for (const file of readdirSync(folder).filter((name) => name.startsWith(prefix))) {
    const path = join(folder, file);
    const match = /^totals: (\d+)/m.exec(readFileSync(path, "utf8"));
    if (match?.[1] === undefined) continue;
    counts.total += Number(match[1]);
    const { stdout } = await execute("callgrind_annotate", ["--threshold=100", path], {
      maxBuffer: 256 * 1024 * 1024,
    });
    for (const line of stdout.split("\n")) {
      const row = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
      if (row?.[1] === undefined || row[2] === undefined || row[2].includes("PROGRAM TOTALS")) continue;
      const cost = Number(row[1].replaceAll(",", ""));
      if (GARBAGE_COLLECTOR.test(row[2])) counts.garbageCollector += cost;
      else if (COMPILER.test(row[2])) counts.compiler += cost;
    }
  }
  return counts;
}

async function measure(
  name: string,
  start: (launcher: string[]) => Promise<Target>,
  folder: string,
  options: Options,
): Promise<{ name: string; perRequest: Counts; failed: Failures }> {
  const launcher = [
    "valgrind",
    "--quiet",
    "--tool=callgrind",
    // V8 writes and rewrites machine code: callgrind must notice it everywhere but in files.
    "--smc-check=all-non-file",
    "--instr-atstart=no",
    `--callgrind-out-file=${join(folder, `${name}.%p`)}`,
  ];
  process.stdout.write(`  ${name}: starting under valgrind, ${options.warmUp} requests to warm up\n`);
  const target = await start(launcher);
  try {
    const pid = String(target.pid);
    const warming = await sendRequests(target, options.warmUp, options.connections);
    await execute("callgrind_control", ["--instr=on", pid]);
    process.stdout.write(`  ${name}: counting ${options.requests} requests\n`);
    const counted = await sendRequests(target, options.requests, options.connections);
    const failed = { count: warming.count + counted.count, first: warming.first ?? counted.first };
    await execute("callgrind_control", ["--instr=off", pid]);
    await execute("callgrind_control", ["--dump", pid]);
    const counts = await readCounts(folder, `${name}.`);
    const perRequest = (value: number) => value / options.requests;
    return {
      name,
      perRequest: {
        total: perRequest(counts.total),
        garbageCollector: perRequest(counts.garbageCollector),
        compiler: perRequest(counts.compiler),
      },
      failed,
    };
  } finally {
    await target.stop();
  }
}

export async function run(args: string[]): Promise<void> {
  const options = parseOptions(args);
  const probe = spawnSync("valgrind", ["--version"], { encoding: "utf8" });
  if (probe.error !== undefined || !probe.stdout.startsWith("valgrind")) {
    process.stdout.write(
      "Skipping the instruction counts: valgrind is not installed (apt-get install valgrind).\n",
    );
    return;
  }
  const folder = mkdtempSync(join(tmpdir(), "tollgate-instructions-"));
  const mock = await startMockUpstream(undefined);
  try {
    process.stdout.write(`Instructions per request (${probe.stdout.trim()}, Node ${process.version})\n`);
    const proxy = await measure(
      "featureless",
      (launcher) => startFeaturelessProxy(mock.port, undefined, launcher),
      folder,
      options,
    );
    const tollgate = await measure(
      "tollgate",
      (launcher) =>
        startTollgate({
          mockPort: mock.port,
          cpus: undefined,
          limits: true,
          profileFolder: undefined,
          launcher,
        }),
      folder,
      options,
    );
    const rest = (counts: Counts) => counts.total - counts.garbageCollector - counts.compiler;
    const format = (value: number, width: number) =>
      Math.round(value).toLocaleString("en-US").padStart(width);
    process.stdout.write(
      `\n${"gateway".padEnd(44)}${"instructions/request".padStart(22)}${"GC".padStart(10)}${"JIT".padStart(10)}${"rest".padStart(10)}${"x proxy".padStart(9)}${"rest x".padStart(8)}${"failed".padStart(8)}\n`,
    );
    for (const row of [proxy, tollgate]) {
      const label =
        row.name === "tollgate" ? "tollgate (auth, rpm/tpm limits, billing on)" : "featureless proxy";
      const counts = row.perRequest;
      process.stdout.write(
        `${label.padEnd(44)}${format(counts.total, 22)}${format(counts.garbageCollector, 10)}${format(counts.compiler, 10)}${format(rest(counts), 10)}${(counts.total / proxy.perRequest.total).toFixed(2).padStart(9)}${(rest(counts) / rest(proxy.perRequest)).toFixed(2).padStart(8)}${String(row.failed.count).padStart(8)}\n`,
      );
    }
    for (const row of [proxy, tollgate]) {
      if (row.failed.first !== undefined)
        process.stdout.write(
          `\n${row.name}: ${row.failed.count} requests failed; the first answered ${row.failed.first}\n`,
        );
    }
    const ratio = tollgate.perRequest.total / proxy.perRequest.total;
    // A refused request costs a fraction of a served one: such a count says nothing.
    if (proxy.failed.count > 0 || tollgate.failed.count > 0)
      process.stdout.write("\nRequests failed: these counts are not the cost of serving them; no ratio.\n");
    else
      process.stdout.write(
        `\nThroughput on one core goes as the inverse: at this count Tollgate would do ${(1 / ratio).toFixed(2)}x the proxy's requests/s (SPEC section 10 asks for 0.85).\n`,
      );
  } finally {
    await mock.stop();
    rmSync(folder, { recursive: true, force: true });
  }
}

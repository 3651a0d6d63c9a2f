/**
 * `npm run bench -- instructions [--requests=N] [--warm-up=N] [--connections=N]`
 *
 * The gateway's cost per request as a count of machine instructions, which does not depend on
 * what else the machine is doing: wall-clock figures on a shared machine swing by a factor of two
 * between runs, instruction counts repeat to about 1 % (the garbage collector's share less so).
 * Each gateway (the featureless proxy, then Tollgate with auth, limits and billing on) runs under
 * valgrind's callgrind against the gateway benchmark's fast mock upstream; after `--warm-up`
 * requests (default 3000) counting is switched on for `--requests` more (default 4000) at
 * `--connections` (default 8), and the table gives instructions per request and the ratio to the
 * proxy. Needs `valgrind` (Debian's package); about 3 minutes.
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
  const options: Options = { requests: 4000, warmUp: 3000, connections: 8 };
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

/** Sends `count` non-streamed requests, `connections` at a time; returns how many failed. */
async function sendRequests(target: Target, count: number, connections: number): Promise<number> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin, { connections });
  const body = JSON.stringify({
    model: target.model("fast"),
    messages: [{ role: "user", content: "Say five words." }],
    max_tokens: 5,
  });
  let left = count;
  let failed = 0;
  const loop = async () => {
    while (left-- > 0) {
      const response = await pool.request({
        method: "POST",
        path: url.pathname,
        headers: target.headers,
        body,
      });
      await response.body.text();
      if (response.statusCode !== 200) failed++;
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  await pool.close();
  return failed;
}

/** The instructions callgrind counted, from every dump file of `prefix` (one per dump and thread). */
function readTotal(folder: string, prefix: string): number {
  let total = 0;
  for (const file of readdirSync(folder).filter((name) => name.startsWith(prefix))) {
    const match = /^totals: (\d+)/m.exec(readFileSync(join(folder, file), "utf8"));
    total += match?.[1] === undefined ? 0 : Number(match[1]);
  }
  return total;
}

async function measure(
  name: string,
  start: (launcher: string[]) => Promise<Target>,
  folder: string,
  options: Options,
): Promise<{ name: string; perRequest: number; failed: number }> {
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
    let failed = await sendRequests(target, options.warmUp, options.connections);
    await execute("callgrind_control", ["--instr=on", pid]);
    process.stdout.write(`  ${name}: counting ${options.requests} requests\n`);
    failed += await sendRequests(target, options.requests, options.connections);
    await execute("callgrind_control", ["--instr=off", pid]);
    await execute("callgrind_control", ["--dump", pid]);
    return { name, perRequest: readTotal(folder, `${name}.`) / options.requests, failed };
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
    const rows = [proxy, tollgate].map((row) => ({
      ...row,
      ratio: row.perRequest / proxy.perRequest,
    }));
    process.stdout.write(
      `\n${"gateway".padEnd(44)}${"instructions/request".padStart(22)}${"x proxy".padStart(10)}${"failed".padStart(8)}\n`,
    );
    for (const row of rows) {
      const label =
        row.name === "tollgate" ? "tollgate (auth, rpm/tpm limits, billing on)" : "featureless proxy";
      process.stdout.write(
        `${label.padEnd(44)}${Math.round(row.perRequest).toLocaleString("en-US").padStart(22)}${row.ratio.toFixed(2).padStart(10)}${String(row.failed).padStart(8)}\n`,
      );
    }
    process.stdout.write(
      `\nThroughput on one core goes as the inverse: at this count Tollgate would do ${(1 / (tollgate.perRequest / proxy.perRequest)).toFixed(2)}x the proxy's requests/s (SPEC section 10 asks for 0.85).\n`,
    );
  } finally {
    await mock.stop();
    rmSync(folder, { recursive: true, force: true });
  }
}

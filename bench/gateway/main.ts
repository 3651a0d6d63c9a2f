/**
 * `npm run bench -- gateway [--duration=SECONDS] [--rounds=N] [--only=NAME,...] [--no-limits] [--profile]`
 *
 * What Tollgate adds on the way to an upstream, measured side by side in one run against the same
 * fast mock upstream (a separate process, mock-upstream.ts):
 * - direct: the load generator talks to the mock itself;
 * - featureless proxy: Fastify + undici forwarding the body, nothing else (featureless-proxy.ts);
 * - tollgate: the real server (`startServer`) with auth, the key's rpm/tpm limits and billing as
 *   the server wires them, routing a catalogue model to the mock (tollgate-gateway.ts);
 * - portkey: the Portkey gateway (`@portkey-ai/gateway`), headless, routed to the mock per request.
 *
 * Each gateway runs in its own process pinned to core 0 (`taskset`); the mock, the load generator
 * (`wrk`, else an undici loop) and this process share core 1. For each target: non-streamed
 * throughput at 16 and 50 connections, latency at 1 connection, gateway CPU time per request
 * (from /proc), time to first chunk and to the end of a 20-chunk stream (one at a time), paced
 * streams (20 chunks, 5 ms apart) at 32 connections, gateway CPU per stream of 20 and of 200
 * chunks, and peak RSS. The targets take turns in `--rounds` rounds (default 3) and each figure is
 * the best of its rounds, so that other work on a shared machine does not decide the ratios.
 * `--profile` records a CPU profile of Tollgate and prints where its time goes. About 4 minutes
 * with the defaults.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatReport } from "./format-report.ts";
import {
  directTarget,
  startFeaturelessProxy,
  startMockUpstream,
  startPortkey,
  startTollgate,
  type Target,
} from "./gateway-targets.ts";
import { chooseLoadGenerator } from "./load-generator.ts";
import {
  combineRounds,
  measurePlain,
  measureStreams,
  type PlainRound,
  type StreamRound,
  type TargetResults,
  warmUp,
} from "./measure-target.ts";
import { summarizeCpuProfiles } from "./summarize-cpu-profile.ts";

const TARGET_NAMES = ["direct", "featureless", "tollgate", "portkey"] as const;
type TargetName = (typeof TARGET_NAMES)[number];

interface BenchOptions {
  durationSeconds: number;
  rounds: number;
  only: readonly TargetName[];
  limits: boolean;
  profile: boolean;
}

function parseOptions(args: readonly string[]): BenchOptions {
  const options: BenchOptions = {
    durationSeconds: 3,
    rounds: 3,
    only: TARGET_NAMES,
    limits: true,
    profile: false,
  };
  for (const arg of args) {
    const [name, value] = arg.split("=", 2);
    if (name === "--duration" && value !== undefined && Number(value) > 0)
      options.durationSeconds = Number(value);
    else if (
      name === "--rounds" &&
      value !== undefined &&
      Number.isInteger(Number(value)) &&
      Number(value) > 0
    )
      options.rounds = Number(value);
    else if (name === "--only" && value !== undefined) {
      const names = value.split(",");
      const unknown = names.filter((candidate) => !(TARGET_NAMES as readonly string[]).includes(candidate));
      if (unknown.length > 0)
        throw new Error(`unknown targets ${unknown.join(", ")}; choose from ${TARGET_NAMES.join(", ")}`);
      options.only = names as TargetName[];
    } else if (name === "--no-limits") options.limits = false;
    else if (name === "--profile") options.profile = true;
    else throw new Error(`unknown option ${arg}; see bench/gateway/main.ts`);
  }
  return options;
}

function hasTaskset(): boolean {
  return spawnSync("taskset", ["-c", "0", "true"]).status === 0;
}

export async function run(args: string[]): Promise<void> {
  const options = parseOptions(args);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const pinned = hasTaskset();
  const gatewayCpus = pinned ? "0" : undefined;
  const otherCpus = pinned ? "1" : undefined;
  // This process (stream probes) stays off the gateways' core.
  if (pinned) spawnSync("taskset", ["-a", "-p", "-c", "1", String(process.pid)], { stdio: "ignore" });
  const generator = chooseLoadGenerator();
  log(
    `gateway benchmark: load by ${generator}, ${pinned ? "gateways on core 0, mock and load on core 1" : "no taskset: processes not pinned"}`,
  );

  const mock = await startMockUpstream(otherCpus);
  const profileFolder = options.profile ? mkdtempSync(join(tmpdir(), "tollgate-bench-profile-")) : undefined;
  const targets: Target[] = [];
  let limits: boolean | undefined;
  const results: TargetResults[] = [];
  try {
    for (const name of options.only) {
      try {
        targets.push(await startTarget(name));
      } catch (error) {
        log(
          `  ${name}: could not start (${error instanceof Error ? error.message : String(error)}); skipped`,
        );
      }
    }
    const measure = { generator, durationSeconds: options.durationSeconds, loadCpus: otherCpus };
    for (const target of targets) {
      log(`  warming up ${target.name}`);
      await warmUp(target, measure);
    }
    // Rounds interleave the targets, and each figure is the best of its rounds: other work on a
    // shared machine then slows one round of one target, not the comparison.
    const plainRounds = new Map<Target, PlainRound[]>(targets.map((target) => [target, []]));
    const streamRounds = new Map<Target, StreamRound[]>(targets.map((target) => [target, []]));
    for (let round = 1; round <= options.rounds; round++) {
      for (const target of targets) {
        log(`  round ${round}/${options.rounds}: ${target.name}, non-streamed at 16, 50 and 1 connections`);
        plainRounds.get(target)?.push(await measurePlain(target, measure));
      }
      for (const target of targets) {
        log(`  round ${round}/${options.rounds}: ${target.name}, streams`);
        streamRounds.get(target)?.push(await measureStreams(target, measure));
      }
    }
    for (const target of targets) {
      results.push(combineRounds(target, plainRounds.get(target) ?? [], streamRounds.get(target) ?? []));
    }
  } finally {
    await Promise.all(targets.map((target) => target.stop()));
    await mock.stop();
  }

  process.stdout.write(
    [
      "",
      `Gateway overhead (Node ${process.version}, ${generator}, ${pinned ? "each gateway pinned to one core" : "unpinned"}, best of ${options.rounds} rounds of ${options.durationSeconds} s runs; Tollgate key limits ${limits === undefined ? "n/a" : limits ? "on" : "off"})`,
      "",
      formatReport(results),
      "",
    ].join("\n"),
  );
  if (profileFolder !== undefined)
    process.stdout.write(`\nTollgate CPU profile\n${summarizeCpuProfiles(profileFolder)}\n`);

  async function startTarget(name: TargetName): Promise<Target> {
    switch (name) {
      case "direct":
        return directTarget(mock.port);
      case "featureless":
        return startFeaturelessProxy(mock.port, gatewayCpus);
      case "tollgate": {
        const tollgate = await startTollgate({
          mockPort: mock.port,
          cpus: gatewayCpus,
          limits: options.limits,
          profileFolder,
        });
        limits = tollgate.limits;
        return tollgate;
      }
      case "portkey":
        return startPortkey(mock.port, gatewayCpus);
      default: {
        const unreachable: never = name;
        throw new Error(`unknown target ${String(unreachable)}`);
      }
    }
  }
}

/**
 * A Tollgate server in a process of its own, so its memory and event loop are measured without the
 * benchmark's clients in them. Started by {@link startServerChild} with `fork`; talks over IPC:
 * it sends `ready` once listening (and, when asked, once its models are loaded), answers `sample`
 * with a {@link ServerSample}, and closes the server and exits on `stop`.
 */
import { fork } from "node:child_process";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type { LlamaEngineStats } from "../../src/engine/llama/llama-engine-stats.ts";
import { readLlamaEngineStats } from "../../src/engine/llama/llama-engine-stats.ts";
import {
  type BenchModelEntry,
  createBenchCatalogModel,
  startBenchServer,
  waitForModels,
} from "./bench-server.ts";
import { readThreadCpuMicroseconds } from "./statistics.ts";

/** What the child is started with. */
export interface ServerChildOptions {
  folder: string;
  models: BenchModelEntry[];
  /** Also catalogue a local model whose file does not exist (status `unavailable`). */
  withUnavailableModel?: boolean;
}

/** One measurement of the server process. */
export interface ServerSample {
  /** Bytes. */
  rss: number;
  /** A full garbage collection ran right before this sample. */
  collected: boolean;
  heapUsed: number;
  /** V8 heap committed (young and old generations), bytes. */
  heapTotal: number;
  external: number;
  /** Event-loop delay since the previous sample, in milliseconds. */
  eventLoopDelay: { p50: number; p99: number; max: number; mean: number };
  /** `process.getActiveResourcesInfo()` counted by type. */
  activeResources: Record<string, number>;
  engines: LlamaEngineStats[];
  /** CPU time of the server's main thread so far, in microseconds; `undefined` where Node cannot tell. */
  mainThreadCpuMicroseconds: number | undefined;
}

type ChildMessage =
  | { type: "ready"; baseUrl: string; key: string }
  | { type: "sample"; sample: ServerSample }
  | { type: "error"; message: string };

type ParentMessage = { type: "sample"; collect: boolean } | { type: "stop" };

/** The parent's handle on a running server child. */
export interface ServerChild {
  baseUrl: string;
  key: string;
  /**
   * Measures the server. With `collect`, a full garbage collection runs first, so RSS shows what is
   * retained rather than where V8's collection cycle happens to be (its pause is left out of the
   * next sample's event-loop delay).
   */
  sample(options?: { collect?: boolean }): Promise<ServerSample>;
  stop(): Promise<void>;
}

/** Forks a server child and resolves once it listens with every local model available. */
export async function startServerChild(options: ServerChildOptions): Promise<ServerChild> {
  const child = fork(fileURLToPath(import.meta.url), [JSON.stringify(options)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    // `--expose-gc` lets a sample ask for a full collection first (see `sample`);
    // TOLLGATE_BENCH_CHILD_FLAGS adds flags for investigations (e.g. --trace-gc).
    execArgv: [
      ...process.execArgv,
      "--expose-gc",
      ...(process.env.TOLLGATE_BENCH_CHILD_FLAGS?.split(" ").filter((flag) => flag !== "") ?? []),
    ],
  });
  const pending: ((message: ChildMessage) => void)[] = [];
  let exited = false;
  child.on("message", (message: ChildMessage) => pending.shift()?.(message));
  const exit = new Promise<void>((resolve) => {
    child.on("exit", () => {
      exited = true;
      for (const waiter of pending.splice(0)) waiter({ type: "error", message: "server child exited" });
      resolve();
    });
  });
  const next = () => new Promise<ChildMessage>((resolve) => pending.push(resolve));
  const ready = await next();
  if (ready.type !== "ready") {
    child.kill();
    throw new Error(`server child failed: ${ready.type === "error" ? ready.message : ready.type}`);
  }
  return {
    baseUrl: ready.baseUrl,
    key: ready.key,
    async sample(sampleOptions = {}) {
      if (exited) throw new Error("server child exited");
      const reply = next();
      child.send({ type: "sample", collect: sampleOptions.collect ?? false } satisfies ParentMessage);
      const message = await reply;
      if (message.type !== "sample") throw new Error(`unexpected reply from server child: ${message.type}`);
      return message.sample;
    },
    async stop() {
      if (!exited) child.send({ type: "stop" } satisfies ParentMessage);
      const timer = setTimeout(() => child.kill(), 15_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

function countResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const resource of process.getActiveResourcesInfo()) counts[resource] = (counts[resource] ?? 0) + 1;
  return counts;
}

async function runChild(options: ServerChildOptions): Promise<void> {
  const send = (message: ChildMessage) => process.send?.(message);
  const models = options.models.map(createBenchCatalogModel);
  if (options.withUnavailableModel) {
    models.push({
      ...createBenchCatalogModel({
        id: "missing",
        path: `${options.folder}/missing.gguf`,
        parallel: 1,
        threads: 1,
        contextLength: 1024,
      }),
    });
  }
  const server = await startBenchServer({ folder: options.folder, models });
  const ids = options.models.map((model) => model.id);
  if (ids.length > 0) await waitForModels({ baseUrl: server.baseUrl, key: server.key, ids });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  process.on("message", (message: ParentMessage) => {
    switch (message.type) {
      case "sample": {
        const toMilliseconds = (nanoseconds: number) => nanoseconds / 1e6;
        // The delay since the last sample is read before a requested collection, and the
        // histogram is reset after it: the collection's pause is the benchmark's, not the server's.
        const eventLoopDelay = {
          p50: toMilliseconds(delay.percentile(50)),
          p99: toMilliseconds(delay.percentile(99)),
          max: toMilliseconds(delay.max),
          mean: toMilliseconds(delay.mean),
        };
        const collect = (globalThis as { gc?: () => void }).gc;
        const collected = message.collect && collect !== undefined;
        if (collected) collect();
        const memory = process.memoryUsage();
        const activeResources = countResources();
        const engines = readLlamaEngineStats();
        const mainThreadCpuMicroseconds = readThreadCpuMicroseconds();
        const reply = () => {
          send({
            type: "sample",
            sample: {
              rss: memory.rss,
              collected,
              heapUsed: memory.heapUsed,
              heapTotal: memory.heapTotal,
              external: memory.external,
              eventLoopDelay,
              activeResources,
              engines,
              mainThreadCpuMicroseconds,
            },
          });
          delay.reset();
        };
        // After a collection, the monitor's timer (due before this one) sees the pause on its
        // next tick; the reset waits until after it.
        if (collected) setTimeout(reply, 1);
        else reply();
        return;
      }
      case "stop":
        delay.disable();
        void server.close().then(() => process.exit(0));
        return;
      default: {
        const unreachable: never = message;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  });
  send({ type: "ready", baseUrl: server.baseUrl, key: server.key });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const options = JSON.parse(process.argv[2] ?? "{}") as ServerChildOptions;
  runChild(options).catch((error: unknown) => {
    process.send?.({ type: "error", message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}

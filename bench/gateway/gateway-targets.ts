/**
 * The processes the gateway benchmark starts: the mock upstream, and each gateway under test
 * (the featureless proxy, Tollgate, Portkey), each pinned with `taskset` where it exists.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** One thing the load is sent to. */
export interface Target {
  name: string;
  /** The gateway's process, measured for CPU and memory; `undefined` for the upstream itself. */
  pid: number | undefined;
  /** `http://127.0.0.1:PORT/v1/chat/completions` */
  url: string;
  headers: Record<string, string>;
  /** The model to ask for: the fast answers, or the paced stream. */
  model: (kind: "fast" | "paced") => string;
  stop(): Promise<void>;
}

/** A child process that printed its JSON ready line. */
interface StartedProcess<Ready> {
  child: ChildProcess;
  ready: Ready;
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const JSON_HEADERS = { "content-type": "application/json" };

/**
 * Runs `node SCRIPT ...`, pinned to `cpus`, or under `launcher` (such as valgrind: the command
 * and its arguments before node's), and waits for its first stdout line (JSON).
 */
async function startNodeScript<Ready>(options: {
  script: string;
  args: string[];
  cpus: string | undefined;
  nodeFlags?: string[];
  launcher?: string[];
}): Promise<StartedProcess<Ready>> {
  const nodeArguments = [...(options.nodeFlags ?? []), options.script, ...options.args];
  const prefix = [
    ...(options.cpus === undefined ? [] : ["taskset", "-c", options.cpus]),
    ...(options.launcher ?? []),
  ];
  const [command = process.execPath, ...commandArguments] = [...prefix, process.execPath, ...nodeArguments];
  const child = spawn(command, commandArguments, { stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! });
  const exited = once(child, "exit").then(([code]) => {
    throw new Error(`${options.script} exited with code ${String(code)} before it was ready`);
  });
  const first = new Promise<string>((resolve) => lines.once("line", resolve));
  const line = await Promise.race([first, exited]);
  lines.close();
  child.stdout?.resume();
  return { child, ready: JSON.parse(line) as Ready };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function startMockUpstream(
  cpus: string | undefined,
): Promise<{ port: number; stop(): Promise<void> }> {
  const { child, ready } = await startNodeScript<{ port: number }>({
    script: here("./mock-upstream.ts"),
    args: [],
    cpus,
  });
  return { port: ready.port, stop: () => stopChild(child) };
}

export function directTarget(mockPort: number): Target {
  return {
    name: "direct (mock)",
    pid: undefined,
    url: `http://127.0.0.1:${mockPort}/v1/chat/completions`,
    headers: JSON_HEADERS,
    model: (kind) => (kind === "paced" ? "paced" : "bench"),
    stop: async () => {},
  };
}

export async function startFeaturelessProxy(
  mockPort: number,
  cpus: string | undefined,
  launcher?: string[],
): Promise<Target> {
  const { child, ready } = await startNodeScript<{ port: number }>({
    script: here("./featureless-proxy.ts"),
    args: [`http://127.0.0.1:${mockPort}`],
    cpus,
    ...(launcher === undefined ? {} : { launcher }),
  });
  return {
    name: "featureless proxy",
    pid: child.pid,
    url: `http://127.0.0.1:${ready.port}/v1/chat/completions`,
    headers: JSON_HEADERS,
    model: (kind) => (kind === "paced" ? "paced" : "bench"),
    stop: () => stopChild(child),
  };
}

export async function startTollgate(options: {
  mockPort: number;
  cpus: string | undefined;
  limits: boolean;
  profileFolder: string | undefined;
  launcher?: string[];
}): Promise<Target & { limits: boolean }> {
  const { child, ready } = await startNodeScript<{ port: number; key: string; limits: boolean }>({
    script: here("./tollgate-gateway.ts"),
    args: [`http://127.0.0.1:${options.mockPort}/v1`, ...(options.limits ? [] : ["--no-limits"])],
    cpus: options.cpus,
    nodeFlags:
      options.profileFolder === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.profileFolder}`],
    ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
  });
  return {
    name: "tollgate",
    pid: child.pid,
    url: `http://127.0.0.1:${ready.port}/v1/chat/completions`,
    headers: { ...JSON_HEADERS, authorization: `Bearer ${ready.key}` },
    model: (kind) => (kind === "paced" ? "bench-paced" : "bench"),
    limits: ready.limits,
    stop: () => stopChild(child),
  };
}

/** The Portkey gateway (`@portkey-ai/gateway`), headless, routed to the mock per request. */
export async function startPortkey(mockPort: number, cpus: string | undefined): Promise<Target> {
  const port = await findFreePort();
  const script = fileURLToPath(import.meta.resolve("@portkey-ai/gateway/build/start-server.js"));
  const nodeArguments = [script, `--port=${port}`, "--headless"];
  const child =
    cpus === undefined
      ? spawn(process.execPath, nodeArguments, {
          stdio: "ignore",
          env: { ...process.env, NODE_ENV: "production" },
        })
      : spawn("taskset", ["-c", cpus, process.execPath, ...nodeArguments], {
          stdio: "ignore",
          env: { ...process.env, NODE_ENV: "production" },
        });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the Portkey gateway exited with code ${child.exitCode}`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stopChild(child);
      throw new Error("the Portkey gateway did not start within 30 s");
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    name: "portkey",
    pid: child.pid,
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: {
      ...JSON_HEADERS,
      authorization: "Bearer sk-bench",
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `http://127.0.0.1:${mockPort}/v1`,
    },
    model: (kind) => (kind === "paced" ? "paced" : "bench"),
    stop: () => stopChild(child),
  };
}

async function findFreePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return address.port;
}

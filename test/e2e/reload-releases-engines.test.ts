/**
 * An engine a reload replaced is closed and then forgotten: nothing keeps its model, context and
 * grammars in memory. Regression (found by a soak of `tollgate serve`): each closed engine's
 * abort reason kept the stack of the call that closed it, whose closures held its replacement,
 * and the set of the start's engines (for /ready) held the first: after 18 reloads that changed a
 * local model's `parallel`, 19 llama models, contexts and grammars were alive. Counted in a real
 * `serve` process, through its inspector.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { killServeProcesses, startServeProcess } from "../support/serve-process.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { until } from "../support/until.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-reload-leak-"));
afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

function writeConfig(file: string, modelPath: string, parallel: number): void {
  writeFileSync(
    file,
    [
      "server: { host: 127.0.0.1, port: 0 }",
      "database: sqlite:./tollgate.db",
      "log_level: warn",
      "models:",
      "  - id: tiny",
      "    kind: chat",
      '    pricing: { input_per_million: "0.10", output_per_million: "0.40" }',
      `    engine: { type: llama, model: "${modelPath}", parallel: ${parallel} }`,
      "",
    ].join("\n"),
  );
}

/**
 * The objects of class `name` alive in the process whose inspector listens at `url`: counted in
 * a heap snapshot taken after a full garbage collection, so what it counts is held by something.
 */
async function countLiveObjects(url: string, name: string): Promise<number> {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  const chunks: string[] = [];
  const answers = new Map<number, () => void>();
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as {
      id?: number;
      method?: string;
      params?: { chunk: string };
    };
    if (message.method === "HeapProfiler.addHeapSnapshotChunk") chunks.push(message.params?.chunk ?? "");
    else if (message.id !== undefined) answers.get(message.id)?.();
  };
  let id = 0;
  const send = (method: string) =>
    new Promise<void>((resolve) => {
      id++;
      answers.set(id, resolve);
      socket.send(JSON.stringify({ id, method, params: {} }));
    });
  try {
    await send("HeapProfiler.enable");
    await send("HeapProfiler.collectGarbage");
    await send("HeapProfiler.takeHeapSnapshot");
  } finally {
    socket.close();
  }
  const snapshot = JSON.parse(chunks.join("")) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields.length;
  const types = snapshot.snapshot.meta.node_types[0];
  let count = 0;
  for (let node = 0; node < snapshot.nodes.length; node += fields)
    if (
      types[snapshot.nodes[node] ?? 0] === "object" &&
      snapshot.strings[snapshot.nodes[node + 1] ?? 0] === name
    )
      count++;
  return count;
}

describe("reloads of `tollgate serve` that replace a local model's engine", () => {
  it("leave no replaced engine's model alive", async () => {
    const configFile = join(folder, "tollgate.yaml");
    const modelPath = await getTestModelPath();
    writeConfig(configFile, modelPath, 2);
    const serve = await startServeProcess(configFile, {
      cwd: folder,
      env: { NODE_OPTIONS: "--inspect=127.0.0.1:0" },
    });
    const inspector = /Debugger listening on (ws:\/\/\S+)/.exec(serve.output())?.[1];
    if (inspector === undefined) throw new Error(`no inspector: ${serve.output()}`);
    const liveModels = () => countLiveObjects(inspector, "LlamaModel");
    await until(async () => (await liveModels()) === 1, "the first engine's model", 20_000);
    for (let reload = 0; reload < 4; reload++) {
      writeConfig(configFile, modelPath, reload % 2 === 0 ? 3 : 2);
      serve.child.kill("SIGHUP");
      // Idle, as a reload usually comes: the new engine loads, and the one it replaced retires.
      await sleep(1_500);
    }
    await until(async () => (await liveModels()) <= 1, "only the current engine's model alive", 20_000);
    expect(await liveModels()).toBe(1);
    serve.child.kill("SIGTERM");
  }, 90_000);
});

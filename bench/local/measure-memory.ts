import { join } from "node:path";
import type { BenchModel } from "./bench-models.ts";
import { createClientAgent } from "./chat-client.ts";
import { CONTEXT_LENGTH, PARALLEL, runClients, SMALL_MODEL } from "./local-bench-setup.ts";
import { type ServerChildOptions, startServerChild } from "./server-child.ts";

/** Resident memory of a server process in its states, in bytes. */
export interface MemoryReport {
  idleEmpty: number;
  idleUnavailable: number;
  loaded: number;
  afterLoad: number;
  /** Event-loop delay in the server process during the burst, in milliseconds. */
  burstDelay: { p50: number; p99: number; max: number };
}

/**
 * Memory of a server in a child process (so the benchmark's own memory is not counted): idle with
 * an empty catalogue, idle with only a local model whose file is missing, with the small model
 * loaded, and after 16 streamed requests (8 at a time).
 */
export async function measureMemory(options: {
  folder: string;
  small: BenchModel;
  threads: number;
  tokens: number;
  say: (text: string) => void;
}): Promise<MemoryReport> {
  const idle = async (childOptions: ServerChildOptions) => {
    const child = await startServerChild(childOptions);
    try {
      // A few requests, so the HTTP path is warm as on a server that has served some.
      for (let request = 0; request < 5; request++) {
        await fetch(`${child.baseUrl}/models`, { headers: { authorization: `Bearer ${child.key}` } });
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return (await child.sample()).rss;
    } finally {
      await child.stop();
    }
  };
  options.say("memory: idle server, empty catalogue");
  const idleEmpty = await idle({ folder: join(options.folder, "idle-empty"), models: [] });
  options.say("memory: idle server, only an unavailable local model");
  const idleUnavailable = await idle({
    folder: join(options.folder, "idle-unavailable"),
    models: [],
    withUnavailableModel: true,
  });
  options.say("memory: small model loaded, then 16 streamed requests, 8 at a time");
  const child = await startServerChild({
    folder: join(options.folder, "loaded"),
    models: [
      {
        id: SMALL_MODEL,
        path: options.small.path,
        parallel: PARALLEL,
        threads: options.threads,
        contextLength: CONTEXT_LENGTH,
      },
    ],
  });
  const agent = createClientAgent();
  try {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const loaded = (await child.sample()).rss;
    const client = { baseUrl: child.baseUrl, key: child.key, agent };
    for (let burst = 0; burst < 2; burst++) {
      await runClients({ client, clients: 8, tokens: options.tokens, stream: true });
    }
    const duringBurst = await child.sample();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const afterLoad = (await child.sample()).rss;
    return { idleEmpty, idleUnavailable, loaded, afterLoad, burstDelay: duringBurst.eventLoopDelay };
  } finally {
    agent.destroy();
    await child.stop();
  }
}

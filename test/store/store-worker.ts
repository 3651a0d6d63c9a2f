/**
 * A store in a worker thread, as another process would hold it: its own connection, running in
 * parallel with the test's thread. Started by `openStoreInWorker`; plain Node (not vitest) runs
 * this file, so it imports only what Node can strip.
 */
import { parentPort, workerData } from "node:worker_threads";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";

/** A call from the test thread: a store method by name, with its arguments. */
export interface WorkerCall {
  callId: number;
  method: "reserve" | "settle" | "credit" | "close";
  argument: unknown;
}

/** The answer to a {@link WorkerCall}: its value, or the message of what it threw. */
export type WorkerAnswer = { callId: number; value: unknown } | { callId: number; error: string };

const port = parentPort;
if (port !== null) {
  const { databaseUrl } = workerData as { databaseUrl: string };
  let store: Store | undefined;
  try {
    store = await openStore(databaseUrl);
    port.postMessage({ ready: true });
  } catch (error) {
    port.postMessage({ ready: false, error: error instanceof Error ? error.message : String(error) });
  }
  const opened = store;
  port.on("message", async (call: WorkerCall) => {
    try {
      if (opened === undefined) throw new Error("The store did not open.");
      const value = await invoke(opened, call);
      port.postMessage({ callId: call.callId, value } satisfies WorkerAnswer);
      if (call.method === "close") port.close();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      port.postMessage({ callId: call.callId, error: message } satisfies WorkerAnswer);
    }
  });
}

async function invoke(store: Store, call: WorkerCall): Promise<unknown> {
  switch (call.method) {
    case "reserve":
      return await store.reserve(call.argument as Parameters<Store["reserve"]>[0]);
    case "settle":
      return await store.settle(call.argument as Parameters<Store["settle"]>[0]);
    case "credit":
      return await store.credit(call.argument as Parameters<Store["credit"]>[0]);
    case "close":
      return await store.close();
    default: {
      const unexpected: never = call.method;
      throw new Error(`Unknown method ${String(unexpected)}`);
    }
  }
}

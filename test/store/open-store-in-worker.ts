import { Worker } from "node:worker_threads";
import type { Store } from "../../src/store/store.ts";
import type { WorkerAnswer, WorkerCall } from "./store-worker.ts";

/** The part of a store that the multi-connection tests drive from another thread. */
export type StoreClient = Pick<Store, "reserve" | "settle" | "credit" | "close">;

/**
 * Opens the store at `databaseUrl` in a new worker thread, with its own connection, and answers
 * a client that forwards calls to it. The worker ends when the client is closed.
 */
export async function openStoreInWorker(databaseUrl: string): Promise<StoreClient> {
  const worker = new Worker(new URL("./store-worker.ts", import.meta.url), { workerData: { databaseUrl } });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextCallId = 0;

  await new Promise<void>((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (message: { ready: boolean; error?: string }) => {
      worker.off("error", reject);
      if (message.ready) resolve();
      else reject(new Error(`The worker could not open the store: ${message.error ?? "unknown error"}`));
    });
  });
  worker.on("message", (answer: WorkerAnswer) => {
    const call = pending.get(answer.callId);
    if (call === undefined) return;
    pending.delete(answer.callId);
    if ("error" in answer) call.reject(new Error(answer.error));
    else call.resolve(answer.value);
  });
  worker.on("error", (error) => {
    for (const call of pending.values()) call.reject(error);
    pending.clear();
  });

  function call(method: WorkerCall["method"], argument: unknown): Promise<unknown> {
    nextCallId += 1;
    const callId = nextCallId;
    return new Promise((resolve, reject) => {
      pending.set(callId, { resolve, reject });
      worker.postMessage({ callId, method, argument } satisfies WorkerCall);
    });
  }

  return {
    reserve: async (reservation) =>
      (await call("reserve", reservation)) as Awaited<ReturnType<Store["reserve"]>>,
    settle: async (usage) => (await call("settle", usage)) as Awaited<ReturnType<Store["settle"]>>,
    credit: async (credit) => (await call("credit", credit)) as Awaited<ReturnType<Store["credit"]>>,
    close: async () => {
      await call("close", undefined);
      await worker.terminate();
    },
  };
}

// @ts-check
/**
 * The worker thread of `startCheckpointer` (start-checkpointer.ts): on a connection of its own,
 * copies the WAL's pages into the database file every `intervalMs` with a passive checkpoint
 * (which never waits for, nor blocks, the server's reads and writes), until told to stop.
 *
 * Plain JavaScript, checked by tsc (`checkJs`): a worker that loads a .ts file starts Node's type
 * stripping again in its own thread, 17 MB more RSS than this file's 21 MB.
 */
import { DatabaseSync } from "node:sqlite";
import { parentPort, workerData } from "node:worker_threads";

/** @type {{ file: string; intervalMs: number }} */
const { file, intervalMs } = workerData;
const port = parentPort;
if (port === null) throw new Error("checkpoint-worker.js runs as a worker thread");

/** @type {DatabaseSync | undefined} */
let database;
/** @type {NodeJS.Timeout | undefined} */
let timer;

function close() {
  clearInterval(timer);
  timer = undefined;
  if (database?.isOpen === true) database.close();
}

/** Tells the parent why, and ends the worker. @param {unknown} error */
function fail(error) {
  close();
  port?.postMessage({ kind: "failed", message: error instanceof Error ? error.message : String(error) });
  port?.close();
}

try {
  database = new DatabaseSync(file);
  const checkpoint = database.prepare("PRAGMA wal_checkpoint(PASSIVE)");
  timer = setInterval(() => {
    try {
      checkpoint.get();
    } catch (error) {
      fail(error);
    }
  }, intervalMs);
  port.postMessage({ kind: "ready" });
} catch (error) {
  fail(error);
}

port.on("message", (message) => {
  if (message !== "stop") return;
  close();
  port.close();
});

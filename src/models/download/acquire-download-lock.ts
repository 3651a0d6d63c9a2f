import { open, rm, stat, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";

/** A held lock; `release()` removes it. */
export interface DownloadLock {
  release(): Promise<void>;
}

export interface AcquireDownloadLockOptions {
  /** The lock file, such as `MODEL.gguf.lock`. */
  path: string;
  signal?: AbortSignal | undefined;
  /** Called once when the lock is held by someone else and the caller starts waiting. */
  onWait?: () => void;
  /** A lock not refreshed for this long belongs to a process that died. Default 30 000. */
  staleMilliseconds?: number;
  /** How often a waiter looks again. Default 1000. */
  pollMilliseconds?: number;
}

/**
 * A lock between processes (replicas sharing a models volume) so that one of them downloads a
 * model while the others wait: the lock file is created exclusively, and its holder touches it
 * every few seconds. A lock left untouched for `staleMilliseconds` (its holder crashed or was
 * killed) is taken over. Within one process, downloads of the same file are already shared.
 */
export async function acquireDownloadLock(options: AcquireDownloadLockOptions): Promise<DownloadLock> {
  const staleMilliseconds = options.staleMilliseconds ?? 30_000;
  const pollMilliseconds = options.pollMilliseconds ?? 1000;
  let waiting = false;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const file = await open(options.path, "wx");
      try {
        await file.writeFile(`${hostname()} ${process.pid}\n`);
      } finally {
        await file.close();
      }
      const heartbeat = setInterval(
        () => {
          const now = new Date();
          utimes(options.path, now, now).catch(() => {});
        },
        Math.max(10, Math.floor(staleMilliseconds / 4)),
      );
      heartbeat.unref();
      return {
        async release() {
          clearInterval(heartbeat);
          await rm(options.path, { force: true });
        },
      };
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
    }
    const held = await stat(options.path).catch(() => undefined);
    if (held !== undefined && Date.now() - held.mtimeMs > staleMilliseconds) {
      await rm(options.path, { force: true });
      continue;
    }
    if (!waiting) {
      waiting = true;
      options.onWait?.();
    }
    await delay(pollMilliseconds, undefined, { signal: options.signal });
  }
}

function isAlreadyExists(error: unknown): boolean {
  return typeof error === "object" && error !== null && "code" in error && error.code === "EEXIST";
}

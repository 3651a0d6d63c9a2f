import type { Agent, RequestInit, Response } from "undici";

/** The dispatcher of every download: undici's own (see {@link downloadFetch}). */
let agent: Agent | undefined;

/**
 * `fetch` for downloads: undici's own, loaded on first use (a server that never downloads never
 * loads it). Node's bundled copy (24.21) fails an internal assertion, which no `catch` can stop,
 * when a server closes the connection mid-body while the reader is paused: that crashed the
 * whole process instead of leaving a partial file to resume (nodejs/undici#5360, fixed in the
 * undici this project depends on). Its fetch goes through an agent of its own: by default both
 * copies use the one global dispatcher, whichever made it first (a `fetch` of Node's own
 * anywhere in the process), and the bug came back through it (seen in a test, as an uncaught
 * exception).
 */
export async function downloadFetch(url: URL, init: RequestInit): Promise<Response> {
  const undici = await import("undici");
  agent ??= new undici.Agent();
  return undici.fetch(url, { ...init, dispatcher: agent });
}

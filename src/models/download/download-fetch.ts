import type { RequestInit, Response } from "undici";

/**
 * `fetch` for downloads: undici's own, loaded on first use (a server that never downloads never
 * loads it). Node's bundled copy (24.21) fails an internal assertion, which no `catch` can stop,
 * when a server closes the connection mid-body while the reader is paused: that crashed the
 * whole process instead of leaving a partial file to resume (nodejs/undici#5360, fixed in the
 * undici this project depends on).
 */
export async function downloadFetch(url: URL, init: RequestInit): Promise<Response> {
  const { fetch } = await import("undici");
  return fetch(url, init);
}

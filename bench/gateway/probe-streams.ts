import { Pool } from "undici";

export interface StreamTimings {
  /** Median milliseconds from sending to the first byte of the body. */
  firstChunkMs: number;
  /** Median milliseconds from sending to the end of the stream. */
  totalMs: number;
  errors: number;
}

/**
 * Sends `count` streamed requests one after another over one keep-alive connection and measures
 * time to the first body chunk and to the end, after `warmUp` unmeasured requests.
 */
export async function probeStreams(options: {
  url: string;
  body: string;
  headers: Record<string, string>;
  count: number;
  warmUp: number;
}): Promise<StreamTimings> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: 1, pipelining: 1 });
  const first: number[] = [];
  const total: number[] = [];
  let errors = 0;
  try {
    for (let index = 0; index < options.warmUp + options.count; index++) {
      const sent = performance.now();
      let firstAt: number | undefined;
      try {
        const response = await pool.request({
          method: "POST",
          path: url.pathname,
          headers: options.headers,
          body: options.body,
        });
        for await (const _ of response.body) firstAt ??= performance.now();
        if (response.statusCode >= 400) errors++;
      } catch {
        errors++;
      }
      if (index < options.warmUp || firstAt === undefined) continue;
      first.push(firstAt - sent);
      total.push(performance.now() - sent);
    }
  } finally {
    await pool.close();
  }
  return { firstChunkMs: median(first), totalMs: median(total), errors };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/**
 * Downloads that start over again and again end (found by a download review): a server whose
 * `200` announced 1000 bytes more than it sent, or one that cut every connection and sent its
 * `206` answers without the `ETag` of its `200`, had the whole file downloaded, dropped ("does not
 * fit", "changed since") and downloaded again for ever, each regrown partial file counted as
 * progress. Each test stops a download that goes on past `requestLimit` requests, so that it
 * fails rather than hangs.
 */
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { maxStartOvers } from "../../src/models/download/retry-transient-failures.ts";
import { expectDownloadError, QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

const served = serveModelFiles({ seed: 11, prefix: "start-over" });
const requestLimit = 30;

/** Downloads `url`, aborted once the server has seen `requestLimit` requests for `name`. */
async function downloadWithinLimit(url: string, name: string, destination: string) {
  const controller = new AbortController();
  const count = () => served.server.requests.filter((request) => request.path === name).length;
  const watch = setInterval(() => {
    if (count() >= requestLimit) controller.abort(new Error(`still downloading after ${count()} requests`));
  }, 5);
  try {
    const error = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, signal: controller.signal }),
    );
    return { error, requests: count() };
  } finally {
    clearInterval(watch);
  }
}

describe("downloadFile with a server that makes it start over", () => {
  it("gives up on a 200 whose Content-Length is larger than its body", async () => {
    const { url, name, destination } = served.prepare({
      etag: "a",
      announcedLength: served.model.bytes.length + 1000,
    });
    const { error, requests } = await downloadWithinLimit(url, name, destination);
    expect(error.message).toMatch(
      /^Gave up after the download started over [23] times, the last time because: (The partial download does not fit|The file on 127\.0\.0\.1:\d+ changed)/,
    );
    expect(error.message).toContain("The server does not send this file consistently");
    expect(error.retryable).toBe(false);
    // 200 (short), 416 (dropped), 200 (short), 416 (dropped), 200 (short): no progress five times.
    // (The client may read a few bytes less of the first body, and resume them before the 416.)
    expect(requests).toBeLessThanOrEqual(2 * maxStartOvers);
    expect(existsSync(destination)).toBe(false);
  });

  it("gives up on a server that cuts every connection and sends 206 answers without an ETag", async () => {
    const { url, name, destination } = served.prepare({
      etag: "a",
      noEtagOnPart: true,
      breakAfterBytes: 2_000_000,
      breakCount: 1000,
    });
    const { error, requests } = await downloadWithinLimit(url, name, destination);
    expect(error.message).toMatch(
      /^Gave up after the download started over [23] times, the last time because: The file on 127\.0\.0\.1:\d+ changed since the partial download began\. /,
    );
    // 200 (cut), 206 (dropped), 200 (cut), 206 (dropped), 200 (cut): five without progress. (A
    // cut answer the client read a little further than the one before is progress: one more.)
    expect(requests).toBeLessThanOrEqual(2 * maxStartOvers);
  });

  it("gives up at the start-over limit even when the attempts in between get further", async () => {
    // Every 200 is cut a little later than the one before, so each regrown file is progress.
    let cuts = 0;
    const { url, name, destination } = served.prepare({ etag: "a", noEtagOnPart: true });
    const file = served.server.files.get(name);
    if (file === undefined) throw new Error("served file missing");
    Object.defineProperty(file, "breakAfterBytes", {
      get: () => 1_000_000 + 100_000 * cuts++,
      set: () => {},
    });
    file.breakCount = 1000;
    const { error, requests } = await downloadWithinLimit(url, name, destination);
    expect(error.message).toMatch(
      new RegExp(`^Gave up after the download started over ${maxStartOvers} times, the last time because`),
    );
    expect(requests).toBe(2 * maxStartOvers);
  });
});

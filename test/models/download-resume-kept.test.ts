/**
 * Resumes that a server answers otherwise than asked keep what was saved (found by a download
 * review): a `200` of the same version (a CDN that ignores `Range`) that broke after 1 MB left a
 * 1 MB partial file where 3 MB had been; a `206` from an earlier byte than asked dropped the
 * partial file; and a server that sends ranges in parts had each part followed by a "connection
 * closed" warning and a pause.
 */
import { readFile, stat } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { formatBytes } from "../../src/models/download/format-download-figures.ts";
import { createModelBytes } from "./model-file-server.ts";
import { expectDownloadError, QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

const served = serveModelFiles({ seed: 14, prefix: "kept" });

/** Serves the model cut after 3 MB once, and leaves a 3 MB partial file of version "a". */
async function startPartially() {
  const prepared = served.prepare({ etag: "a", breakAfterBytes: 3_000_000, breakCount: 1 });
  await expectDownloadError(
    downloadFile({ ...QUICK_DOWNLOAD, url: prepared.url, destination: prepared.destination, maxAttempts: 1 }),
  );
  // The client may not read the last bytes sent before the connection closed.
  const saved = (await stat(`${prepared.destination}.partial`)).size;
  expect(saved).toBeGreaterThan(2_000_000);
  const file = served.server.files.get(prepared.name);
  if (file === undefined) throw new Error("served file missing");
  return { ...prepared, file, saved };
}

function requestsFor(name: string) {
  return served.server.requests.filter((request) => request.path === name).map((request) => request.range);
}

describe("downloadFile resuming against a server that answers otherwise than asked", () => {
  it("keeps the partial file when a 200 of the same version breaks early, and appends to it later", async () => {
    const { url, destination, file, saved } = await startPartially();
    Object.assign(file, { ignoreRange: true, breakAfterBytes: 1_000_000, breakCount: 1 });
    const notices: string[] = [];
    const onNotice = (message: string) => notices.push(message);
    await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1, onNotice }),
    );
    expect((await stat(`${destination}.partial`)).size).toBe(saved);
    const file2 = await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice });
    expect(file2.bytes).toBe(served.model.bytes.length);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(notices).toContain(
      `${new URL(url).host} sent the whole file again; comparing the ${formatBytes(saved)} already saved, then resuming.`,
    );
    expect(notices.some((notice) => notice.includes("starting over"))).toBe(false);
  });

  it("starts over when a 200 naming the same version sends other bytes", async () => {
    const { url, destination, file } = await startPartially();
    const other = await createModelBytes(15);
    Object.assign(file, { ignoreRange: true, bytes: other.bytes });
    const notices: string[] = [];
    const saved = await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      onNotice: (m) => notices.push(m),
    });
    expect(saved.bytes).toBe(other.bytes.length);
    expect((await readFile(destination)).equals(other.bytes)).toBe(true);
    expect(notices).toContainEqual(
      expect.stringContaining(
        "sent bytes that differ from the partial download, although it named the same version",
      ),
    );
  });

  it("resumes from a 206 that starts before the byte asked for, without starting over", async () => {
    const { url, name, destination, file, saved } = await startPartially();
    file.rangeStartsEarlier = 1000;
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (m) => notices.push(m) });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(requestsFor(name)).toEqual([undefined, `bytes=${saved}-`]);
    expect(notices.some((notice) => notice.includes("starting over"))).toBe(false);
  });

  it("does not ask again and again for a part that ends where the partial file does", async () => {
    const { url, name, destination, file } = await startPartially();
    Object.assign(file, { rangeStartsEarlier: 1_000_000, rangeCap: 1_000_000 });
    const controller = new AbortController();
    const watch = setInterval(() => {
      if (requestsFor(name).length >= 30) controller.abort(new Error("still asking"));
    }, 5);
    try {
      const failure = await expectDownloadError(
        downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 2, signal: controller.signal }),
      );
      expect(failure.message).toMatch(/^The connection to 127\.0\.0\.1:\d+ closed after/);
      expect(requestsFor(name)).toHaveLength(3);
    } finally {
      clearInterval(watch);
    }
  });

  it("asks for the next range at once when a server sends the file in parts", async () => {
    const { url, name, destination } = served.prepare({
      etag: "a",
      rangeCap: 2_000_000,
      breakAfterBytes: 1_000_000,
      breakCount: 1,
    });
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (m) => notices.push(m) });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    // Parts of 2 MB after the first answer broke (after up to 1 MB).
    const ranges = requestsFor(name);
    expect(ranges).toHaveLength(4);
    const starts = ranges.slice(1).map((range) => Number(/^bytes=(\d+)-$/.exec(range ?? "")?.[1]));
    expect(starts[1]).toBe((starts[0] ?? 0) + 2_000_000);
    expect(starts[2]).toBe((starts[0] ?? 0) + 4_000_000);
    // One retry, for the broken first answer; none for the parts, and no warning.
    expect(notices.filter((notice) => notice.includes("Retrying"))).toHaveLength(1);
    expect(notices.filter((notice) => notice.startsWith("Resuming"))).toHaveLength(1);
  });
});

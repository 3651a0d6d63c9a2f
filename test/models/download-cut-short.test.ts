import { existsSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { downloadFile, UNVALIDATED_OVERLAP_BYTES } from "../../src/models/download/download-file.ts";
import { expectDownloadError, QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

// Downloads a server ends early while claiming them complete (no Content-Length, or too small a
// one), and redirects to URLs that are not http: or https:.

const served = serveModelFiles({ seed: 7, prefix: "cut" });
const { prepare } = served;

describe("downloadFile with a body that ends early", () => {
  it("saves a whole body sent without Content-Length", async () => {
    const { url, destination } = prepare({ announcedLength: "none" });
    const file = await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    expect(file.bytes).toBe(served.model.bytes.length);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it("resumes a body without Content-Length that the connection cut short, rather than saving it", async () => {
    const { url, name, destination } = prepare({
      announcedLength: "none",
      breakAfterBytes: 2_000_000,
      breakCount: 1,
    });
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    const ranges = served.server.requests
      .filter((request) => request.path === name)
      .map((request) => request.range);
    expect(ranges).toEqual([undefined, `bytes=${2_000_000 - UNVALIDATED_OVERLAP_BYTES}-`]);
    expect(notices[0]).toMatch(
      /^The download from 127\.0\.0\.1:\d+ was cut short: the connection closed after 2\.0 MB, before the end of the model file \(its tensor data ends at byte \d+ \(tensor [^)]+\), but the file has 2000000 bytes\)\. Retrying in/,
    );
  });

  it("never saves a body without Content-Length cut short on every attempt", async () => {
    const { url, destination } = prepare({
      announcedLength: "none",
      breakAfterBytes: 2_000_000,
      breakCount: 10,
      ignoreRange: true,
    });
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 2 }),
    );
    expect(failure.failure).toBe("interrupted");
    expect(failure.message).toContain("was cut short");
    expect(existsSync(destination)).toBe(false);
    // Kept for a later resume, as after any broken connection, and the error says how much.
    expect((await stat(`${destination}.partial`)).size).toBe(2_000_000);
    expect(failure.keptBytes).toBe(2_000_000);
  });

  it("says nothing was kept when the server failed from the first byte", async () => {
    const { url, destination } = prepare({ statusCode: 500, statusCount: 10 });
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 2 }),
    );
    expect(failure.failure).toBe("server-error");
    expect(failure.retryable).toBe(true);
    expect(failure.keptBytes).toBe(0);
  });

  it("deletes a file that a too small Content-Length cut short, and says so", async () => {
    const { url, destination } = prepare({ announcedLength: 3_000_000 });
    const failure = await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination }));
    expect(failure.failure).toBe("size-mismatch");
    expect(failure.message).toMatch(
      new RegExp(
        `^The download of ${url.replace(/[./]/g, "\\$&")} was cut short: its tensor data ends at byte \\d+ \\(tensor [^)]+\\), but the file has 3000000 bytes; the download was deleted\\.`,
      ),
    );
    expect(existsSync(destination)).toBe(false);
    expect(existsSync(`${destination}.partial`)).toBe(false);
  });

  it("trusts a verified SHA-256 and size without reading the header", async () => {
    const { url, destination } = prepare({ announcedLength: "none" });
    const file = await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      expectedSize: served.model.bytes.length,
      expectedSha256: served.model.sha256,
    });
    expect(file.sha256).toBe(served.model.sha256);
  });
});

describe("downloadFile and redirects", () => {
  // An 8-byte "model" (magic and version) that a data: URL carries itself.
  const tiny = Buffer.from("R0dVRgMAAAA=", "base64");

  it("refuses a redirect to a data: URL, naming the scheme", async () => {
    const { url, destination } = prepare({
      bytes: tiny,
      redirectTo: `data:application/octet-stream;base64,${tiny.toString("base64")}`,
    });
    const failure = await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination }));
    expect(failure.failure).toBe("invalid-response");
    expect(failure.message).toBe(
      `${url} redirects to a data: URL; only redirects to http: and https: URLs are followed.`,
    );
    expect(existsSync(destination)).toBe(false);
  });

  it("refuses a redirect to a file: URL, naming the scheme", async () => {
    const { url, destination } = prepare({ redirectTo: "file:///etc/passwd" });
    const failure = await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination }));
    expect(failure.failure).toBe("invalid-response");
    expect(failure.message).toContain("redirects to a file: URL");
    expect(existsSync(destination)).toBe(false);
  });
});

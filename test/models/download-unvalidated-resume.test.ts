/**
 * A download resumed from a server that names no version of its file (no `ETag`, no
 * `Last-Modified`) has nothing to send as `If-Range`: a file replaced meanwhile by one of the same
 * size was spliced onto the partial file (the old version's start, the new one's rest), and,
 * without a published checksum, saved. The range now starts a little before the resume point, and
 * those bytes are compared with the saved ones.
 */
import { readFile } from "node:fs/promises";
import { beforeAll, describe, expect, it } from "vitest";
import { downloadFile, UNVALIDATED_OVERLAP_BYTES } from "../../src/models/download/download-file.ts";
import { createModelBytes } from "./model-file-server.ts";
import { QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

const served = serveModelFiles({ seed: 21, prefix: "unvalidated" });
let replacement: Buffer;

beforeAll(async () => {
  replacement = (await createModelBytes(22)).bytes;
});

describe("downloadFile resuming from a server without validators", () => {
  it("starts over when the file was replaced by one of the same size", async () => {
    expect(replacement.length).toBe(served.model.bytes.length);
    expect(replacement.equals(served.model.bytes)).toBe(false);
    const { url, name, destination } = served.prepare({ breakAfterBytes: 2_000_000, breakCount: 1 });
    const file = served.server.files.get(name);
    if (file === undefined) throw new Error("served file missing");
    const requests = () => served.server.requests.filter((request) => request.path === name);
    // The old version until its first answer broke off, the new one after.
    Object.defineProperty(file, "bytes", {
      get: () => (requests().length > 1 ? replacement : served.model.bytes),
    });
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    expect((await readFile(destination)).equals(replacement)).toBe(true);
    expect(notices.join("\n")).toMatch(
      /changed since the partial download began \(its bytes before the resume point differ/,
    );
    // The first answer (cut), the resume with an overlap (which showed the change), the new version whole.
    const ranges = requests().map((request) => request.range);
    expect(ranges).toHaveLength(3);
    expect(ranges[1]).toMatch(/^bytes=\d+-$/);
    expect(ranges[2]).toBeUndefined();
  });

  it("resumes an unchanged file, asking again for the overlap only", async () => {
    const { url, name, destination } = served.prepare({ breakAfterBytes: 2_000_000, breakCount: 1 });
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    const ranges = served.server.requests
      .filter((request) => request.path === name)
      .map((request) => request.range);
    expect(ranges).toHaveLength(2);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? "")?.[1]);
    // What the client had saved when the connection broke, less the overlap.
    expect(resumedAt).toBeGreaterThan(2_000_000 - UNVALIDATED_OVERLAP_BYTES - 200_000);
    expect(resumedAt).toBeLessThanOrEqual(2_000_000 - UNVALIDATED_OVERLAP_BYTES);
  });
});

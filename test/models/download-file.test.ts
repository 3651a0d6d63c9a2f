import { closeSync, existsSync, openSync, writeSync } from "node:fs";
import { readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { downloadFile, UNVALIDATED_OVERLAP_BYTES } from "../../src/models/download/download-file.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { createModelBytes, startModelFileServer } from "./model-file-server.ts";
import { expectDownloadError, QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

const served = serveModelFiles({ seed: 5, prefix: "model" });
const { folder, prepare } = served;

describe("downloadFile", () => {
  it("downloads a whole file to its destination and leaves no partial file", async () => {
    const { url, destination } = prepare();
    const progress: number[] = [];
    const file = await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      onProgress: (update) => progress.push(update.receivedBytes),
    });
    expect(file).toEqual({ path: destination, bytes: served.model.bytes.length, sha256: undefined });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(existsSync(`${destination}.partial`)).toBe(false);
    expect(progress.at(-1)).toBe(served.model.bytes.length);
  });

  it("keeps the partial file after a broken connection and resumes it with a Range request", async () => {
    const { url, name, destination } = prepare({ breakAfterBytes: 1_000_000, breakCount: 1 });
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }),
    );
    expect(failure.failure).toBe("interrupted");
    expect(failure.retryable).toBe(true);
    expect(existsSync(destination)).toBe(false);
    const kept = (await stat(`${destination}.partial`)).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(1_000_000);

    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    const seen = served.server.requests.filter((request) => request.path === name);
    // No ETag or Last-Modified: the range starts early, and the overlap is compared.
    expect(seen.map((request) => request.range)).toEqual([
      undefined,
      `bytes=${Math.max(0, kept - UNVALIDATED_OVERLAP_BYTES)}-`,
    ]);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(existsSync(`${destination}.partial`)).toBe(false);
    expect(notices.join("\n")).toMatch(/Resuming at [\d.]+ [kM]B of [\d.]+ MB\./);
  });

  it("retries by itself after broken connections, each attempt continuing where the last one stopped", async () => {
    const { url, name, destination } = prepare({ breakAfterBytes: 700_000, breakCount: 2 });
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    const ranges = served.server.requests
      .filter((request) => request.path === name)
      .map((request) => request.range);
    expect(ranges).toHaveLength(3);
    expect(ranges[0]).toBeUndefined();
    const offsets = ranges.slice(1).map((range) => Number(/^bytes=(\d+)-$/.exec(range ?? "")?.[1]));
    expect(offsets[0]).toBeGreaterThan(0);
    expect(offsets[1]).toBeGreaterThan(offsets[0] ?? 0);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(notices.filter((message) => /Retrying in/.test(message))).toHaveLength(2);
  });

  it("starts over when the server ignores the Range request (200 instead of 206)", async () => {
    const { url, name, destination } = prepare({ ignoreRange: true });
    // A partial file from an earlier attempt, with wrong bytes: it must not survive the restart.
    await writeFile(`${destination}.partial`, Buffer.alloc(500_000, 7));
    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    expect(
      served.server.requests.filter((request) => request.path === name).map((request) => request.range),
    ).toEqual([`bytes=${500_000 - UNVALIDATED_OVERLAP_BYTES}-`]);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(notices.join("\n")).toMatch(/cannot resume downloads; starting over/);
  });

  it("finishes without a body when the partial file is already whole (416)", async () => {
    const { url, destination } = prepare();
    await writeFile(`${destination}.partial`, served.model.bytes);
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it("verifies the SHA-256 from the server's ETag", async () => {
    const { url, destination } = prepare({ etag: served.model.sha256 });
    const file = await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      trustedEtagOrigin: served.server.baseUrl,
    });
    expect(file.sha256).toBe(served.model.sha256);
  });

  it("rejects a file whose SHA-256 does not match and leaves neither the file nor a partial file", async () => {
    const wrong = "0".repeat(64);
    const { url, destination } = prepare({ etag: wrong });
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, trustedEtagOrigin: served.server.baseUrl }),
    );
    expect(failure.failure).toBe("checksum");
    expect(failure.message).toContain(`but ${wrong} was expected`);
    expect(existsSync(destination)).toBe(false);
    expect(existsSync(`${destination}.partial`)).toBe(false);
  });

  it("follows a Hugging Face style redirect and verifies against its X-Linked-ETag", async () => {
    const target = prepare();
    const wrong = prepare({ redirectTo: target.name, linkedEtag: "f".repeat(64) });
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url: wrong.url, destination: wrong.destination }),
    );
    expect(failure.failure).toBe("checksum");
    const right = prepare({ redirectTo: target.name, linkedEtag: served.model.sha256 });
    const file = await downloadFile({ ...QUICK_DOWNLOAD, url: right.url, destination: right.destination });
    expect(file.sha256).toBe(served.model.sha256);
  });

  it("ignores a plain ETag from a server it does not trust", async () => {
    const { url, destination } = prepare({ etag: "0".repeat(64) });
    const file = await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    expect(file.sha256).toBeUndefined();
  });

  it("refuses a file whose size differs from the one expected", async () => {
    const { url, destination } = prepare();
    const failure = await expectDownloadError(
      downloadFile({ ...QUICK_DOWNLOAD, url, destination, expectedSize: served.model.bytes.length + 1 }),
    );
    expect(failure.failure).toBe("size-mismatch");
    expect(existsSync(destination)).toBe(false);
  });

  it("fails with a clear error on 404, without retrying or leaving files", async () => {
    const destination = join(folder, "missing.gguf");
    const url = `${served.server.baseUrl}/files/missing.gguf`;
    const failure = await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination }));
    expect(failure.failure).toBe("not-found");
    expect(failure.retryable).toBe(false);
    expect(failure.message).toBe(`${url} does not exist (HTTP 404 Not Found); check the model URI.`);
    expect(served.server.requests.filter((request) => request.path === "/files/missing.gguf")).toHaveLength(
      1,
    );
    expect(existsSync(destination)).toBe(false);
    expect(existsSync(`${destination}.partial`)).toBe(false);
  });

  it("fails at once, as unreachable, when nothing listens", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const failure = await expectDownloadError(
      downloadFile({
        ...QUICK_DOWNLOAD,
        url: `${closed.baseUrl}/model.gguf`,
        destination: join(folder, "nowhere.gguf"),
      }),
    );
    expect(failure.failure).toBe("unreachable");
    expect(failure.message).toMatch(/^Cannot reach 127\.0\.0\.1:\d+ \(.*ECONNREFUSED.*\)\.$/);
  });

  it("abandons a stalled response and resumes", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { url, name, destination } = prepare({ gate });
    const notices: string[] = [];
    const download = downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      stallTimeoutMilliseconds: 200,
      onNotice: (message) => {
        notices.push(message);
        // The retry finds the server answering again.
        const file = served.server.files.get(name);
        if (file !== undefined) file.gate = undefined;
        open();
      },
    });
    await download;
    expect(notices[0]).toMatch(/sent nothing for 0\.2 s\. Retrying/);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it("downloads a file that changed between runs again whole, never a mix of both versions (If-Range)", async () => {
    const changed = await createModelBytes(6);
    const { url, name, destination } = prepare({ etag: "v1", breakAfterBytes: 1_000_000, breakCount: 1 });
    await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }));
    const kept = (await stat(`${destination}.partial`)).size;
    served.server.files.set(name, { bytes: changed.bytes, etag: "v2" });

    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    const seen = served.server.requests.filter((request) => request.path === name);
    expect(seen.map(({ range, ifRange }) => ({ range, ifRange }))).toEqual([
      { range: undefined, ifRange: undefined },
      { range: `bytes=${kept}-`, ifRange: '"v1"' },
    ]);
    expect((await readFile(destination)).equals(changed.bytes)).toBe(true);
    expect(notices.join("\n")).toMatch(/changed since the partial download began; starting over/);
    expect(existsSync(`${destination}.partial.validator`)).toBe(false);
  });

  it("starts over when a server ignoring If-Range sends the rest of another version (206, new ETag)", async () => {
    const changed = await createModelBytes(6);
    const { url, name, destination } = prepare({ etag: "v1", breakAfterBytes: 1_000_000, breakCount: 1 });
    await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }));
    served.server.files.set(name, { bytes: changed.bytes, etag: "v2", ignoreIfRange: true });

    await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    const ranges = served.server.requests
      .filter((request) => request.path === name)
      .map((request) => request.range);
    expect(ranges).toHaveLength(3);
    expect(ranges[2]).toBeUndefined();
    expect((await readFile(destination)).equals(changed.bytes)).toBe(true);
  });

  it("starts over when a server without ETag or Last-Modified sends the rest of a file of another size", async () => {
    const changed = await createModelBytes(6);
    const longer = Buffer.concat([changed.bytes, Buffer.alloc(100_000, 1)]);
    const { url, name, destination } = prepare({ breakAfterBytes: 1_000_000, breakCount: 1 });
    await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }));
    served.server.files.set(name, { bytes: longer });

    const notices: string[] = [];
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, onNotice: (message) => notices.push(message) });
    const ranges = served.server.requests
      .filter((request) => request.path === name)
      .map((request) => request.range);
    expect(ranges).toHaveLength(3);
    expect(ranges[2]).toBeUndefined();
    expect((await readFile(destination)).equals(longer)).toBe(true);
    expect(notices.join("\n")).toMatch(/changed since the partial download began; starting over/);
  });

  it("keeps the partial file when a resume is answered 200 with a page that is not the model, and resumes later", async () => {
    const { url, name, destination } = prepare({ etag: "v1", breakAfterBytes: 1_000_000, breakCount: 1 });
    await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }));
    const kept = await readFile(`${destination}.partial`);
    // An expired signed URL, or a CDN's error page, sent with 200.
    served.server.files.set(name, {
      bytes: Buffer.from("<html>Please sign in</html>"),
      contentType: "text/html",
    });

    const notices: string[] = [];
    const failure = await expectDownloadError(
      downloadFile({
        ...QUICK_DOWNLOAD,
        url,
        destination,
        maxAttempts: 2,
        onNotice: (message) => notices.push(message),
      }),
    );
    expect(failure.retryable).toBe(true);
    expect(failure.message).toBe(
      `${url} answered the resumed download with a body (text/html) that is not a GGUF model file (which starts with "GGUF"), such as a login or error page; the partial download was kept. If this repeats, check the URL, and that the file may be downloaded without signing in.`,
    );
    expect(notices.filter((message) => /Retrying in/.test(message))).toHaveLength(1);
    expect(notices.join("\n")).not.toMatch(/starting over/);
    expect((await readFile(`${destination}.partial`)).equals(kept)).toBe(true);

    served.server.files.set(name, { bytes: served.model.bytes, etag: "v1" });
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    const seen = served.server.requests.filter((request) => request.path === name);
    expect(seen.at(-1)?.range).toBe(`bytes=${kept.length}-`);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it("writes each byte of a resume at its own offset, so a second writer of the same file cannot shift them", async () => {
    const { url, destination } = prepare({ breakAfterBytes: 1_000_000, breakCount: 1 });
    await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination, maxAttempts: 1 }));
    let written = false;
    await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      onProgress: ({ receivedBytes }) => {
        if (written || receivedBytes < 2_000_000) return;
        written = true;
        // A process that lost its lock, further ahead, writes the next bytes of the same file.
        const file = openSync(`${destination}.partial`, "r+");
        writeSync(file, served.model.bytes, receivedBytes, 300_000, receivedBytes);
        closeSync(file);
      },
    });
    expect(written).toBe(true);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it("neither checks, deletes nor renames the file once the lock is lost", async () => {
    const { url, destination } = prepare();
    const lost = new ModelDownloadError("interrupted", "lock lost");
    const failure = await expectDownloadError(
      downloadFile({
        ...QUICK_DOWNLOAD,
        url,
        destination,
        ensureLockHeld: () => Promise.reject(lost),
      }),
    );
    expect(failure).toBe(lost);
    expect(existsSync(destination)).toBe(false);
    expect((await readFile(`${destination}.partial`)).equals(served.model.bytes)).toBe(true);
  });

  it("names the version by Last-Modified, never by a weak ETag, when resuming", async () => {
    const lastModified = "Wed, 21 Oct 2015 07:28:00 GMT";
    const { url, name, destination } = prepare({
      etag: 'W/"v1"',
      lastModified,
      breakAfterBytes: 1_000_000,
      breakCount: 1,
    });
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination });
    const seen = served.server.requests.filter((request) => request.path === name);
    expect(seen.map((request) => request.ifRange)).toEqual([undefined, lastModified]);
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });

  it.skipIf(!existsSync("/dev/full"))(
    "reports a full disk as a models folder that cannot take the file, without retrying",
    async () => {
      const { url, name, destination } = prepare();
      // Every write to /dev/full fails with ENOSPC, as on a full disk.
      await symlink("/dev/full", `${destination}.partial`);
      const failure = await expectDownloadError(downloadFile({ ...QUICK_DOWNLOAD, url, destination }));
      expect(failure.failure).toBe("not-writable");
      expect(failure.retryable).toBe(false);
      expect(failure.message).toMatch(
        new RegExp(
          `^The models folder ${folder} cannot take the file \\(ENOSPC: .*\\); make the folder \\(TOLLGATE_MODELS_DIR\\) writable, with room for the model\\.$`,
        ),
      );
      expect(served.server.requests.filter((request) => request.path === name)).toHaveLength(1);
      await rm(`${destination}.partial`);
    },
  );

  it("stops when its signal is aborted, keeping the partial file", async () => {
    const { url, destination } = prepare();
    const controller = new AbortController();
    const download = downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      signal: controller.signal,
      onProgress: (progress) => {
        if (progress.receivedBytes > 0) controller.abort(new Error("stop"));
      },
    });
    await expect(download).rejects.toThrow("stop");
    expect(existsSync(destination)).toBe(false);
  });
});

import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";

/** How the server serves one file; change it between requests to script a test. */
export interface ServedFile {
  bytes: Buffer;
  /** Answer every request with 200 and the whole file, as a server without range support does. */
  ignoreRange?: boolean;
  /** Cut the connection after this many body bytes, for the next `breakCount` requests. */
  breakAfterBytes?: number;
  breakCount?: number;
  /** Send this as `ETag` (quoted; write `W/"..."` whole for a weak one). */
  etag?: string;
  /** Send this as `Last-Modified`. */
  lastModified?: string;
  /** Send no `ETag` with `206` answers (only with `200`), as some servers do. */
  noEtagOnPart?: boolean;
  /** Answer a `Range` with at most this many bytes (a `206` ending before the file does). */
  rangeCap?: number;
  /** Answer a `Range` with a `206` that starts this many bytes before the byte asked for. */
  rangeStartsEarlier?: number;
  /** Send the rest of the file for a `Range` even when `If-Range` names another version. */
  ignoreIfRange?: boolean;
  /** Answer 302 to `redirectTo` with `X-Linked-ETag` (quoted) and `X-Linked-Size`, as Hugging Face does. */
  redirectTo?: string;
  linkedEtag?: string;
  /** Wait for this before sending the body. */
  gate?: Promise<void>;
  /** The `Content-Type` sent; default `application/octet-stream`. */
  contentType?: string;
  /**
   * The `Content-Length` of a `200` answer, written by hand on the raw socket, which closes after
   * the body: a number (fewer bytes than the file, as a broken server announces), or `"none"` for
   * a body that ends when the connection closes. Default: the file's size, sent the usual way.
   */
  announcedLength?: number | "none";
  /** Send this as `Retry-After` with a `statusCode` answer instead of the file. */
  retryAfter?: string;
  /** Answer this HTTP status (with `retryAfter`, if set) to the next `statusCount` requests. */
  statusCode?: number;
  statusCount?: number;
}

/** One request the server saw. */
export interface SeenRequest {
  path: string;
  range: string | undefined;
  ifRange: string | undefined;
  authorization: string | undefined;
}

/** A local HTTP server with model files and Hugging Face repository listings. */
export interface ModelFileServer {
  /** `http://127.0.0.1:PORT` */
  baseUrl: string;
  files: Map<string, ServedFile>;
  /** Repository listings by `ORG/REPO`, served at `/api/models/ORG/REPO`. */
  listings: Map<string, unknown>;
  /** HTTP statuses to answer, one per request, before a listing is served, by `ORG/REPO`. */
  listingFailures: Map<string, number[]>;
  requests: SeenRequest[];
  close(): Promise<void>;
}

export async function startModelFileServer(): Promise<ModelFileServer> {
  const files = new Map<string, ServedFile>();
  const listings = new Map<string, unknown>();
  const listingFailures = new Map<string, number[]>();
  const requests: SeenRequest[] = [];
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    requests.push({
      path,
      range: request.headers.range,
      ifRange: readIfRange(request),
      authorization: request.headers.authorization,
    });
    serve(request, response, path).catch(() => response.destroy());
  });

  async function serve(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    const listing = /^\/api\/models\/(.+)$/.exec(path)?.[1];
    if (listing !== undefined) {
      const failure = listingFailures.get(decodeURIComponent(listing))?.shift();
      if (failure !== undefined) {
        response.writeHead(failure, { "content-type": "text/plain" }).end("Try again later");
        return;
      }
      const body = listings.get(decodeURIComponent(listing));
      if (body === undefined) {
        response
          .writeHead(401, { "content-type": "application/json" })
          .end('{"error":"Repository not found"}');
      } else {
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
      }
      return;
    }
    const file = files.get(decodeURIComponent(path));
    if (file === undefined) {
      response.writeHead(404, { "content-type": "text/plain" }).end("Entry not found");
      return;
    }
    if (file.redirectTo !== undefined) {
      response
        .writeHead(302, {
          location: file.redirectTo,
          ...(file.linkedEtag === undefined ? {} : { "x-linked-etag": `"${file.linkedEtag}"` }),
          "x-linked-size": String(file.bytes.length),
        })
        .end();
      return;
    }
    if (file.statusCode !== undefined && (file.statusCount ?? 1) > 0) {
      file.statusCount = (file.statusCount ?? 1) - 1;
      const retryAfter = file.retryAfter === undefined ? {} : { "retry-after": file.retryAfter };
      response.writeHead(file.statusCode, { "content-type": "text/plain", ...retryAfter }).end("Try again");
      return;
    }
    const total = file.bytes.length;
    const etag =
      file.etag === undefined ? undefined : file.etag.startsWith("W/") ? file.etag : `"${file.etag}"`;
    const ifRange = readIfRange(request);
    // If-Range (RFC 9110 section 13.1.5): the range only for the version it names, else the whole file.
    const stale =
      ifRange !== undefined && !file.ignoreIfRange && ifRange !== etag && ifRange !== file.lastModified;
    const range = file.ignoreRange || stale ? undefined : /^bytes=(\d+)-$/.exec(request.headers.range ?? "");
    const start =
      range === undefined || range === null
        ? 0
        : Math.max(0, Number(range[1]) - (file.rangeStartsEarlier ?? 0));
    const headers: Record<string, string> = {
      "content-type": file.contentType ?? "application/octet-stream",
      ...(etag === undefined ? {} : { etag }),
      ...(file.lastModified === undefined ? {} : { "last-modified": file.lastModified }),
    };
    if (start >= total && range) {
      response.writeHead(416, { ...headers, "content-range": `bytes */${total}` }).end();
      return;
    }
    const end = range && file.rangeCap !== undefined ? Math.min(total, start + file.rangeCap) : total;
    const body = file.bytes.subarray(start, end);
    if (range) {
      if (file.noEtagOnPart) delete headers.etag;
      response.writeHead(206, {
        ...headers,
        "content-range": `bytes ${start}-${end - 1}/${total}`,
        "content-length": String(body.length),
      });
    } else {
      response.writeHead(200, { ...headers, "content-length": String(total) });
    }
    if (file.gate !== undefined) await file.gate;
    if (!range && file.announcedLength !== undefined) {
      sendRaw(response, headers, file, body);
      return;
    }
    if (file.breakAfterBytes !== undefined && (file.breakCount ?? 1) > 0) {
      file.breakCount = (file.breakCount ?? 1) - 1;
      // Ending the socket (not destroying it) delivers the bytes written so far, then closes.
      response.write(body.subarray(0, file.breakAfterBytes), () => response.socket?.end());
      return;
    }
    response.end(body);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    files,
    listings,
    listingFailures,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A `200` answer written on the raw socket, with the `Content-Length` that `file` announces (or
 * none), then the body (cut after `breakAfterBytes`, if set) and the connection closed: what
 * Node's own response writer would not send.
 */
function sendRaw(
  response: ServerResponse,
  headers: Record<string, string>,
  file: ServedFile,
  body: Buffer,
): void {
  const socket = response.socket;
  if (socket === null) return;
  response.detachSocket(socket);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  if (file.announcedLength !== "none") lines.push(`content-length: ${file.announcedLength}\r\n`);
  let sent = body;
  if (file.breakAfterBytes !== undefined && (file.breakCount ?? 1) > 0) {
    file.breakCount = (file.breakCount ?? 1) - 1;
    sent = body.subarray(0, file.breakAfterBytes);
  }
  socket.write(`HTTP/1.1 200 OK\r\n${lines.join("")}connection: close\r\n\r\n`);
  socket.end(sent);
}

function readIfRange(request: IncomingMessage): string | undefined {
  const header = request.headers["if-range"];
  return typeof header === "string" ? header : undefined;
}

/** A generated tiny GGUF model as bytes, with its SHA-256. */
export async function createModelBytes(seed = 1): Promise<{ bytes: Buffer; sha256: string }> {
  const folder = await mkdtemp(join(tmpdir(), "tollgate-model-bytes-"));
  try {
    const model = await writeTestModel({ path: join(folder, "model.gguf"), seed, size: "tiny" });
    const bytes = await readFile(model.path);
    return { bytes, sha256: createHash("sha256").update(bytes).digest("hex") };
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

/** A Hugging Face `/api/models/ORG/REPO?blobs=true` body listing these files. */
export function createListing(
  repository: string,
  files: { path: string; bytes?: Buffer; sha256?: string }[],
): unknown {
  return {
    id: repository,
    siblings: files.map((file) =>
      file.bytes === undefined
        ? { rfilename: file.path, size: 100 }
        : {
            rfilename: file.path,
            size: file.bytes.length,
            lfs: { sha256: file.sha256, size: file.bytes.length, pointerSize: 135 },
          },
    ),
  };
}

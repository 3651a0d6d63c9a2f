import { posix } from "node:path";
import type { HuggingFaceEndpoint } from "./hugging-face-endpoint.ts";
import { listHuggingFaceRepository } from "./list-hugging-face-repository.ts";
import type { ModelUri } from "./parse-model-uri.ts";
import { selectGgufFile } from "./select-gguf-file.ts";

/** Where a model URI's file is downloaded from, and what is known about it in advance. */
export interface RemoteModelFile {
  url: string;
  /** The remote file's name, for messages. */
  name: string;
  size: number | undefined;
  /** Lowercase hex SHA-256. */
  sha256: string | undefined;
}

/**
 * Resolves a model URI to a download: an `hf:` URI through the repository's file listing (the
 * file is then fetched from `ENDPOINT/ORG/REPO/resolve/main/PATH`), a URL as it is.
 */
export async function resolveRemoteModelFile(options: {
  uri: ModelUri;
  endpoint: HuggingFaceEndpoint;
  signal?: AbortSignal | undefined;
}): Promise<RemoteModelFile> {
  const { uri, endpoint } = options;
  switch (uri.type) {
    case "url":
      return {
        url: uri.url.href,
        name: posix.basename(uri.url.pathname) || uri.url.host,
        size: undefined,
        sha256: undefined,
      };
    case "hugging-face": {
      const files = await listHuggingFaceRepository({
        endpoint,
        organization: uri.organization,
        repository: uri.repository,
        signal: options.signal,
      });
      const file = selectGgufFile({
        repository: `${uri.organization}/${uri.repository}`,
        files,
        selector: uri.file,
      });
      const path = file.path.split("/").map(encodeURIComponent).join("/");
      return {
        url: `${endpoint.baseUrl}/${encodeURIComponent(uri.organization)}/${encodeURIComponent(uri.repository)}/resolve/main/${path}`,
        name: file.path,
        size: file.size,
        sha256: file.sha256,
      };
    }
    default: {
      const unexpected: never = uri;
      throw new Error(`unexpected model URI ${JSON.stringify(unexpected)}`);
    }
  }
}

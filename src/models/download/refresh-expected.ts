import type { DownloadFileOptions, ExpectedFile } from "./download-file.ts";

/** What a download checks the file against; `stale` once the file changed, until asked again. */
export interface Expected extends ExpectedFile {
  stale: boolean;
}

/**
 * Forgets what was known of the file's old version, and asks what is known of the new one
 * (`refreshExpected`); a failure to (a broken connection) leaves it to the next attempt to ask.
 */
export async function refreshExpected(options: DownloadFileOptions, expected: Expected): Promise<void> {
  const fresh: ExpectedFile = (await options.refreshExpected?.()) ?? {
    size: options.expectedSize,
    sha256: options.expectedSha256,
  };
  expected.size = fresh.size;
  expected.sha256 = fresh.sha256;
  expected.stale = false;
}
